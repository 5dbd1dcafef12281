import DeliveryEngine
import Foundation

/// A directory of JSON files, one per event; each is written to a temporary name, fsynced, then renamed. Files that
/// are not an event (corrupt, empty, partial, written by something else) go to `quarantine/` beside them.
package struct FileSpool: Spool {
    package let directory: URL
    /// The largest file read as an event: a record is a few hundred bytes.
    package static let maximumFileBytes = 1 << 20

    package init(directory: String) throws {
        self.directory = URL(fileURLWithPath: directory, isDirectory: true)
        try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
    }

    package var quarantine: URL { directory.appendingPathComponent("quarantine", isDirectory: true) }

    package func write(_ record: EventRecord) throws {
        let data = Data(record.jsonText.utf8)
        let final = directory.appendingPathComponent(record.fileName)
        let temporary = directory.appendingPathComponent(".\(record.fileName).\(UUID().uuidString)")
        let descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0 else { throw SpoolError.cannotWrite("the spool file \(temporary.path)") }
        let written = data.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress, $0.count) }
        let synced = fsync(descriptor)
        close(descriptor)
        guard written == data.count, synced == 0, rename(temporary.path, final.path) == 0 else {
            unlink(temporary.path)
            throw SpoolError.cannotWrite("the spool file \(final.path)")
        }
        syncDirectory()
    }

    package func remove(_ record: EventRecord) {
        unlink(directory.appendingPathComponent(record.fileName).path)
    }

    package func recover() -> SpoolRecovery {
        var recovery = SpoolRecovery()
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
        for name in names where name != "quarantine" {
            let path = directory.appendingPathComponent(name).path
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            if name.hasPrefix(".") {
                // A write that a crash interrupted before its rename: the sender was never told 202 for it.
                if unlink(path) == 0 { recovery.temporaryFilesRemoved += 1 }
                continue
            }
            switch read(path) {
            case .success(let record):
                recovery.records.append(record)
            case .failure(let reason):
                moveAside(name)
                recovery.quarantined.append((name, reason.description))
            }
        }
        return recovery
    }

    private func read(_ path: String) -> Result<EventRecord, SpoolError> {
        guard path.hasSuffix(".json") else { return .failure(.unreadable("not a .json spool file")) }
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let size = attributes[.size] as? Int, size <= Self.maximumFileBytes
        else { return .failure(.unreadable("larger than \(Self.maximumFileBytes) bytes or unreadable")) }
        guard let data = FileManager.default.contents(atPath: path), !data.isEmpty else { return .failure(.unreadable("empty")) }
        guard let record = try? JSONDecoder().decode(EventRecord.self, from: data) else {
            return .failure(.unreadable("not a spooled event (corrupt or partial JSON)"))
        }
        if let defect = record.defect { return .failure(.unreadable(defect)) }
        return .success(record)
    }

    private func moveAside(_ name: String) {
        try? FileManager.default.createDirectory(at: quarantine, withIntermediateDirectories: true)
        let target = quarantine.appendingPathComponent("\(name).\(Int(Date().timeIntervalSince1970))")
        if rename(directory.appendingPathComponent(name).path, target.path) != 0 {
            unlink(directory.appendingPathComponent(name).path)  // it must not be read again on every start
        }
        syncDirectory()
    }

    /// A rename or unlink is durable only once the directory is synced too.
    private func syncDirectory() {
        let directoryDescriptor = open(directory.path, O_RDONLY)
        if directoryDescriptor >= 0 {
            fsync(directoryDescriptor)
            close(directoryDescriptor)
        }
    }
}

extension EventRecord {
    /// The file name: stable for the event, safe on any file system.
    package var fileName: String {
        let name = (keys.first ?? project).unicodeScalars.map { CharacterSet.alphanumerics.contains($0) ? String($0) : "_" }.joined()
        return String(name.prefix(180)) + ".json"
    }

}
