import NIOConcurrencyHelpers

/// Where deliveries run: jobs handed in from any task (a webhook's, the spool's replay) run in worker tasks that are
/// children of one task group, owned by the engine's service, so a stop waits for them and nothing outlives the engine.
///
/// Workers are kept between jobs. Handing a job to an idle worker wakes just that worker: one scheduling hop, as a
/// detached task would cost. (A single consumer that added a child per job cost two hops, and under load the first
/// queued behind the requests: p99 at 32 connections went from 24 to 45 ms.) A new worker is started only when none
/// is idle, and at most ``maximumIdle`` wait for work, so a burst leaves no crowd of tasks behind.
final class DeliveryTasks: Sendable {
    typealias Job = @Sendable () async -> Void

    /// Idle workers kept at most; more end when their job ends.
    static let maximumIdle = 128

    private struct State {
        var idle: [CheckedContinuation<Job?, Never>] = []
        /// Jobs waiting for a worker being started.
        var queued: [Job] = []
        var head = 0
        var closed = false

        mutating func takeQueued() -> Job? {
            guard head < queued.count else { return nil }
            let job = queued[head]
            head += 1
            // Taken jobs are dropped once they are half the array, so it never holds more than twice what waits.
            if head == queued.count {
                (queued, head) = ([], 0)
            } else if head >= 64, head * 2 >= queued.count {
                queued.removeFirst(head)
                head = 0
            }
            return job
        }
    }

    private let state = NIOLockedValueBox(State())
    /// One element per worker to start; ``run()`` starts them in its group.
    private let starts: AsyncStream<Void>
    private let startWorker: AsyncStream<Void>.Continuation

    init() { (starts, startWorker) = AsyncStream.makeStream() }

    /// Starts `job` (once ``run()`` runs); false once closed: the engine is stopping and runs nothing new.
    func add(_ job: @escaping Job) -> Bool {
        enum Next {
            case hand(CheckedContinuation<Job?, Never>)
            case start
            case refuse
        }
        let next = state.withLockedValue { state -> Next in
            if state.closed { return .refuse }
            if let worker = state.idle.popLast() { return .hand(worker) }
            state.queued.append(job)
            startWorker.yield()  // under the lock: a close cannot come between the queuing and the start
            return .start
        }
        switch next {
        case .hand(let worker): worker.resume(returning: job)
        case .start: break
        case .refuse: return false
        }
        return true
    }

    /// Takes no more jobs; ``run()`` returns once those under way end.
    func close() {
        let idle = state.withLockedValue { state in
            state.closed = true
            startWorker.finish()  // after every start yielded under the lock: those are still delivered
            defer { state.idle = [] }
            return state.idle
        }
        for worker in idle { worker.resume(returning: nil) }
    }

    /// Runs every job added until closed; returns when all have ended. Called once.
    func run() async {
        await withDiscardingTaskGroup { group in
            for await _ in starts { group.addTask { await self.work() } }
        }
    }

    /// How many workers wait for a job.
    var idleWorkers: Int { state.withLockedValue { $0.idle.count } }

    private func work() async {
        while let job = await nextJob() { await job() }
    }

    /// A queued job, else the next job handed in; nil when closed, or when enough workers are idle already.
    private func nextJob() async -> Job? {
        if let job = state.withLockedValue({ $0.takeQueued() }) { return job }
        return await withCheckedContinuation { continuation in
            let now: Job?? = state.withLockedValue { state in
                if let job = state.takeQueued() { return .some(job) }
                if state.closed || state.idle.count >= Self.maximumIdle { return .some(nil) }
                state.idle.append(continuation)
                return .none
            }
            if let now { continuation.resume(returning: now) }
        }
    }
}
