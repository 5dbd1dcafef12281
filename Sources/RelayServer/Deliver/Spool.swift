import Foundation
import RelayCore

/// An event acknowledged before its pings settled, as kept on disk until they do.
struct SpoolRecord: Codable, Sendable, Equatable {
    var keys: [String]
    var project: String
    var eventID: String?
    var format: String
    var version: TemplateVersion
    var receivedAt: Date

    /// The file name: stable for the event, safe on any file system.
    var fileName: String {
        let name = keys[0].unicodeScalars.map { CharacterSet.alphanumerics.contains($0) ? String($0) : "_" }.joined()
        return String(name.prefix(180)) + ".json"
    }
}

/// Where acknowledged events wait until delivered, so a crash or restart loses none.
protocol Spool: Sendable {
    /// Writes the record durably (fsynced) before the sender is told 202.
    func write(_ record: SpoolRecord) throws
    func remove(_ record: SpoolRecord)
    /// Everything left from before, to deliver on start.
    func pending() -> [SpoolRecord]
}

/// A directory of JSON files, one per event; each is written to a temporary name, fsynced, then renamed.
struct FileSpool: Spool {
    let directory: URL

    init(directory: String) throws {
        self.directory = URL(fileURLWithPath: directory, isDirectory: true)
        try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
    }

    func write(_ record: SpoolRecord) throws {
        let data = try JSONEncoder().encode(record)
        let final = directory.appendingPathComponent(record.fileName)
        let temporary = directory.appendingPathComponent(".\(record.fileName).\(UUID().uuidString)")
        let descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0 else { throw SpoolError.cannotWrite(temporary.path) }
        let written = data.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress, $0.count) }
        let synced = fsync(descriptor)
        close(descriptor)
        guard written == data.count, synced == 0, rename(temporary.path, final.path) == 0 else {
            unlink(temporary.path)
            throw SpoolError.cannotWrite(final.path)
        }
        // The rename is durable only once the directory is synced too.
        let directoryDescriptor = open(directory.path, O_RDONLY)
        if directoryDescriptor >= 0 {
            fsync(directoryDescriptor)
            close(directoryDescriptor)
        }
    }

    func remove(_ record: SpoolRecord) {
        unlink(directory.appendingPathComponent(record.fileName).path)
    }

    func pending() -> [SpoolRecord] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }.sorted().compactMap { name in
            guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path) else { return nil }
            return try? JSONDecoder().decode(SpoolRecord.self, from: data)
        }
    }
}

enum SpoolError: Error, CustomStringConvertible {
    case cannotWrite(String)
    var description: String {
        switch self {
        case .cannotWrite(let path): "the spool file \(path) could not be written and synced"
        }
    }
}
