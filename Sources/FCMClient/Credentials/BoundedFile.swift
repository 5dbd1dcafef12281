import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads small files (keys, secrets, configuration) with a bound: only a regular file (a symbolic link to one, as
/// mounted secrets are, included) of at most `limit` bytes is read. A device, a pipe or a huge file (`/dev/zero`,
/// `/dev/stdin`, a mistaken log file) is refused at once instead of blocking or filling memory.
public enum BoundedFile {
    /// 1 MiB: a key file is about 2 KB, a configuration file a few KB.
    public static let defaultLimit = 1 << 20

    /// The file's bytes, or nil when it cannot be opened, is not a regular file, or is larger than `limit`.
    public static func read(_ path: String, limit: Int = defaultLimit) -> Data? {
        // Non-blocking, so opening a FIFO with no writer returns at once; it is then refused as not a regular file.
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, Int(status.st_size) <= limit else { return nil }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while data.count <= limit {
            let count = buffer.withUnsafeMutableBytes { Foundation.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        return data.count <= limit ? data : nil
    }

    /// The file as UTF-8 text, or nil.
    public static func text(_ path: String, limit: Int = defaultLimit) -> String? {
        read(path, limit: limit).flatMap { String(data: $0, encoding: .utf8) }
    }
}
