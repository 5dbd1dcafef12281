import Foundation

/// Reads small files (keys, secrets, configuration) with a bound: a path that names a device, a pipe or a huge file
/// (`/dev/zero`, a mistaken log file) is refused instead of read until memory runs out.
public enum BoundedFile {
    /// 1 MiB: a key file is about 2 KB, a configuration file a few KB.
    public static let defaultLimit = 1 << 20

    /// The file's bytes, or nil when it cannot be opened or is larger than `limit`.
    public static func read(_ path: String, limit: Int = defaultLimit) -> Data? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: limit + 1) else { return nil }
        return data.count <= limit ? data : nil
    }

    /// The file as UTF-8 text, or nil.
    public static func text(_ path: String, limit: Int = defaultLimit) -> String? {
        read(path, limit: limit).flatMap { String(data: $0, encoding: .utf8) }
    }
}
