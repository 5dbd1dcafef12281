import CoreMetrics
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayCore
import ServiceLifecycle
import Testing

@testable import DeliveryEngine

/// An event of project `p` for `version`, known by its version alone unless `keys` says otherwise.
func record(_ version: Int, keys: [String]? = nil, routes: [String]? = nil) -> EventRecord {
    EventRecord(
        keys: keys ?? ["p/version/\(version)"], project: "p", eventID: nil, format: "template-version",
        version: try! JSONDecoder().decode(TemplateVersion.self, from: Data(#"{"versionNumber":"\#(version)"}"#.utf8)),
        receivedAt: Date(timeIntervalSince1970: 1_800_000_000), routes: routes)
}

func report(_ route: String, _ status: DeliveryReport.Status) -> DeliveryReport {
    DeliveryReport(route: route, status: status, attempts: [])
}

/// A registry whose deliveries run in a task group for the duration of `body`, on `clock`.
func withRecentEvents(
    window: Duration = .seconds(600), maxInFlight: Int = 10_000, spool: (any Spool)? = nil, clock: any DeliveryClock = ManualDeliveryClock(),
    _ body: (RecentEvents) async throws -> Void
) async throws {
    let tasks = DeliveryTasks()
    let recent = RecentEvents(window: window, maxInFlight: maxInFlight, spool: spool, clock: clock, tasks: tasks)
    async let running: Void = tasks.run()
    defer { tasks.close() }
    try await body(recent)
    tasks.close()
    await running
}

/// Waits for `condition`, checking it as things happen. `limit` bounds a broken engine, not a timing expectation.
func eventually(
    _ what: String, within limit: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation, _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(5))
    }
    Issue.record("never happened: \(what)", sourceLocation: sourceLocation)
    throw CancellationError()
}

/// FCM as the test scripts it: each send takes the next scripted answer (an error, or nil for accepted); once the
/// script runs out every send is accepted. Records what was sent.
final class ScriptedSender: MessageSender {
    let service = "FCM"
    private let state: NIOLockedValueBox<(script: [SendFailure?], sent: [String])>

    init(_ script: [SendFailure?] = []) { state = NIOLockedValueBox((script, [])) }

    var sent: [String] { state.withLockedValue { $0.sent } }

    func send(_ payload: PingPayload, project: String, validateOnly: Bool, beforeRequest: RequestGate) async throws(SendFailure) -> String {
        let message = ByteBuffer(bytes: payload.encoded)
        if let reason = await beforeRequest() { throw .withheld(reason) }
        let failure = state.withLockedValue { state -> SendFailure? in
            state.sent.append(String(buffer: message))
            return state.script.isEmpty ? nil : state.script.removeFirst()
        }
        if let failure { throw failure }
        return "projects/\(project)/messages/\(sent.count)"
    }

    static func unavailable(retryAfter: Duration? = nil) -> SendFailure {
        SendFailure(.transient, "FCM answered 503 UNAVAILABLE", httpStatus: 503, errorCode: "UNAVAILABLE", retryAfter: retryAfter)
    }
}

/// A spool in memory that records what it was asked, and can hold a write until told to go on.
final class RecordingSpool: Spool, @unchecked Sendable {
    let files = NIOLockedValueBox<[String: EventRecord]>([:])
    let writes = NIOLockedValueBox(0)
    /// While set, `write` blocks until it is signalled; `entered` says a write is waiting.
    let hold: DispatchSemaphore?
    let entered = DispatchSemaphore(value: 0)

    init(hold: DispatchSemaphore? = nil, files: [EventRecord] = []) {
        self.hold = hold
        for record in files { self.files.withLockedValue { $0[record.keys.first ?? record.project] = record } }
    }

    func write(_ record: EventRecord) throws {
        if let hold {
            entered.signal()
            hold.wait()
        }
        writes.withLockedValue { $0 += 1 }
        files.withLockedValue { $0[record.keys.first ?? record.project] = record }
    }
    func remove(_ record: EventRecord) { files.withLockedValue { $0[record.keys.first ?? record.project] = nil } }
    func recover() -> SpoolRecovery { SpoolRecovery(records: Array(files.withLockedValue { $0.values })) }
}

/// Metrics that go nowhere: the engine's tests read its state, not a registry.
let noMetrics: any MetricsFactory = NOOPMetricsHandler.instance

/// A logger that writes nothing below `critical`: the tests read outcomes, not lines.
let quietLogger: Logger = {
    var logger = Logger(label: "engine-test")
    logger.logLevel = .critical
    return logger
}()

/// An engine on a manual clock, running as a service for the duration of `body`, then stopped gracefully.
func withRunningEngine(
    spool: (any Spool)? = nil, settings: EngineSettings = EngineSettings(), clock: ManualDeliveryClock,
    replan: @escaping @Sendable (EventRecord) -> DeliveryPlan? = { _ in nil }, _ body: (DeliveryEngine, ServiceGroup) async throws -> Void
) async throws {
    let engine = DeliveryEngine(settings: settings, spool: spool, metrics: noMetrics, clock: clock, logger: quietLogger, replan: replan)
    let group = ServiceGroup(services: [engine], gracefulShutdownSignals: [], logger: quietLogger)
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        try await body(engine, group)
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
    }
}
