import Foundation
import RelayStore

/// A throwaway PostgreSQL server for one test: `initdb` in a temporary directory, `pg_ctl` on a free loopback port,
/// removed afterwards. Debian's `postgresql` package provides the programs (`.ci/run` installs it); they refuse to run
/// as root, so as root they run as the `postgres` user, in a directory that user owns.
final class PostgresCluster: @unchecked Sendable {
    let directory: URL
    /// Set once, before the cluster is handed out (a first start that found its port taken picks another).
    private(set) var port: Int
    private let bin: URL

    /// Where Debian puts the programs (not on PATH), the newest version first.
    static func binDirectory() throws -> URL {
        let root = URL(fileURLWithPath: "/usr/lib/postgresql")
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root.path))?.compactMap(Int.init).sorted(by: >) ?? []
        for version in versions {
            let bin = root.appendingPathComponent("\(version)/bin")
            if FileManager.default.isExecutableFile(atPath: bin.appendingPathComponent("initdb").path) { return bin }
        }
        throw Failure(description: "PostgreSQL is not installed (apt-get install postgresql): no /usr/lib/postgresql/*/bin/initdb")
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private init(directory: URL, port: Int, bin: URL) {
        (self.directory, self.port, self.bin) = (directory, port, bin)
    }

    /// A new cluster, started, with an empty database `rc_relay`.
    static func start() async throws -> PostgresCluster {
        let bin = try binDirectory()
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("rc-relay-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let cluster = PostgresCluster(directory: directory, port: try freePort(), bin: bin)
        if getuid() == 0 { try await blocking { try run("/bin/chown", ["-R", "postgres:postgres", directory.path]) } }
        try await cluster.program("initdb", ["-D", cluster.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
        // A port found free can still be taken before the server binds it (by another test that picked it too). The
        // server's log says so, and a first start then tries another port; a restart keeps its port, which clients know.
        for attempt in 1... {
            do {
                try await cluster.startServer()
                break
            } catch let failure as Failure where attempt < 5 && failure.description.contains("could not bind") {
                cluster.port = try freePort()
            }
        }
        try await cluster.program("createdb", ["-h", "127.0.0.1", "-p", "\(cluster.port)", "-U", "postgres", "rc_relay"])
        return cluster
    }

    var data: String { directory.appendingPathComponent("data").path }

    /// The store's settings for this server (plain TCP on loopback). The statement timeout is generous (a loaded CI
    /// machine under the thread sanitizer is slow); the test of a hung database gives a short one.
    func settings(lease: Duration = .seconds(30), statementTimeout: Duration = .seconds(10)) -> StoreSettings {
        StoreSettings(
            host: "127.0.0.1", port: port, username: "postgres", database: "rc_relay", tls: .disable, lease: lease,
            statementTimeout: statementTimeout)
    }

    var url: String { "postgres://postgres@127.0.0.1:\(port)/rc_relay?sslmode=disable" }

    /// Starts the server and returns once it accepts connections (`pg_ctl -w`, waiting up to 300 s rather than its
    /// default 60: a TSan soak beside a CPU hog once saw a start take longer).
    func startServer() async throws {
        do {
            try await launch()
        } catch {
            // The server's own log says why it was not ready (a soak run met a start over `pg_ctl`'s 60 s once).
            let log = (try? String(contentsOf: directory.appendingPathComponent("log"), encoding: .utf8)) ?? "(no log)"
            throw Failure(description: "\(error)\nthe server's log:\n\(log.suffix(4000))")
        }
    }

    private func launch() async throws {
        try await program(
            "pg_ctl",
            [
                "-D", data, "-w", "-t", "300", "-l", directory.appendingPathComponent("log").path, "-o",
                "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1 -c fsync=off", "start",
            ])
    }

    /// Stops the server at once (open connections are cut, as in a crash or failover).
    func stopServer() async throws {
        try await program("pg_ctl", ["-D", data, "-w", "-t", "300", "-m", "immediate", "stop"])
    }

    /// Sends `signal` to the server and each of its processes (SIGSTOP: a database that hangs without closing
    /// anything; SIGCONT: back).
    func signalServer(_ signal: Int32) throws {
        let pidFile = directory.appendingPathComponent("data/postmaster.pid").path
        guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8), let postmaster = Int32(text.split(separator: "\n")[0]) else {
            throw Failure(description: "no postmaster.pid")
        }
        var pids: [Int32] = [postmaster]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, Int32(fields[1]) == postmaster { pids.append(pid) }
        }
        for pid in pids { kill(pid, signal) }
    }

    /// Runs SQL with psql, for what a test checks behind the relay's back.
    func sql(_ statement: String) async throws -> String {
        try await program("psql", ["-h", "127.0.0.1", "-p", "\(port)", "-U", "postgres", "-d", "rc_relay", "-At", "-c", statement])
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Stops the server and removes its files.
    func destroy() async {
        try? await stopServer()
        try? FileManager.default.removeItem(at: directory)
    }

    @discardableResult
    private func program(_ name: String, _ arguments: [String]) async throws -> String {
        let path = bin.appendingPathComponent(name).path
        // As root, the programs run as `postgres` (the server refuses root), from /tmp, which that user can enter.
        if getuid() == 0 {
            return try await Self.blocking {
                try Self.run("/usr/sbin/runuser", ["-u", "postgres", "--", "/usr/bin/env", "-C", "/tmp", path] + arguments)
            }
        }
        return try await Self.blocking { try Self.run(path, arguments) }
    }

    /// Runs `work`, which blocks (a program run to its end: `pg_ctl -w` may wait up to a minute), on a thread of its
    /// own. On Swift's cooperative pool (one thread per core: two here) two such waits stall every task of the test
    /// process, other tests' statements and timers included, and a store test then timed out waiting 60 s for an
    /// answer PostgreSQL had given (soak runs under the thread sanitizer, 2026-11-27).
    @discardableResult
    private static func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try work() }) }.start()
        }
    }

    /// Runs a program to its end with `posix_spawn` and `waitpid`: Foundation's `Process` waits for descriptors the
    /// server that `pg_ctl start` leaves running inherits, so it would never see `pg_ctl` end.
    @discardableResult
    private static func run(_ executable: String, _ arguments: [String]) throws -> String {
        // Output and errors go to separate files: psql run as `postgres` from a directory that user cannot enter
        // warns about it on stderr, and a query's answer must not carry the warning.
        let output = NSTemporaryDirectory() + "rc-relay-pg-output-\(UUID().uuidString)"
        let errors = output + "-errors"
        defer {
            try? FileManager.default.removeItem(atPath: output)
            try? FileManager.default.removeItem(atPath: errors)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, errors, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw Failure(description: "\(executable) could not start (error \(spawned))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        // Exited normally with status 0: WIFEXITED and WEXITSTATUS, which Swift does not import.
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            let said = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
            throw Failure(
                description: "\(executable) \(arguments.joined(separator: " ")) failed (status \(status)): \(text)\(said)")
        }
        return text
    }

    /// A port nothing listens on now, below the kernel's range for outgoing connections (`ip_local_port_range`). The
    /// kernel's own pick for port 0 lies inside that range, where a test's outgoing connection can take it between the
    /// pick and the server's start or restart (CI, 2026-12-05: `could not bind IPv4 address "127.0.0.1": Address
    /// already in use` on port 33025, at a first start).
    private static func freePort() throws -> Int {
        let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
            .split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        let ceiling = min(range?.first ?? 32768, 65536)
        let floor = max(1024, ceiling - 12000)
        for _ in 0..<200 {
            let port = Int.random(in: floor..<ceiling)
            if try bindable(port) { return port }
        }
        throw Failure(description: "no free port in \(floor)..<\(ceiling)")
    }

    /// Whether a socket can bind 127.0.0.1:`port` now.
    private static func bindable(_ port: Int) throws -> Bool {
        let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw Failure(description: "no socket") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        return withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 }
        }
    }
}

/// Runs `body` with a fresh cluster, destroyed afterwards whatever happens.
func withPostgres(_ body: (PostgresCluster) async throws -> Void) async throws {
    let cluster = try await PostgresCluster.start()
    do {
        try await body(cluster)
    } catch {
        await cluster.destroy()
        throw error
    }
    await cluster.destroy()
}
