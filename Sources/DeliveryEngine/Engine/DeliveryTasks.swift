/// Where deliveries run: jobs handed in from any task (a webhook's, the spool's replay) run as children of one task
/// group, owned by the engine's service, so a stop waits for them and nothing outlives the engine.
final class DeliveryTasks: Sendable {
    typealias Job = @Sendable () async -> Void
    private let jobs: AsyncStream<Job>
    private let intake: AsyncStream<Job>.Continuation

    init() { (jobs, intake) = AsyncStream.makeStream() }

    /// Starts `job` (once ``run()`` runs); false once closed: the engine is stopping and runs nothing new.
    func add(_ job: @escaping Job) -> Bool {
        if case .terminated = intake.yield(job) { return false }
        return true
    }

    /// Takes no more jobs; ``run()`` returns once those under way end.
    func close() { intake.finish() }

    /// Runs every job added until closed; returns when all have ended. Called once.
    func run() async {
        await withDiscardingTaskGroup { group in
            for await job in jobs { group.addTask { await job() } }
        }
    }
}
