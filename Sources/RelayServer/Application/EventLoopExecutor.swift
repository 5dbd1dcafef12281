import NIOCore
import NIOPosix

/// Runs the relay's tasks on the event loops that already do its I/O (the listeners' and the HTTP client's), instead
/// of Swift's global thread pool: a webhook's steps then stay on the thread that read it, rather than hopping between
/// a loop and a pool thread at every `await`.
///
/// NIO's global-executor takeover does not work in a binary with a static Swift standard library (the hook it looks up
/// is not exported), so the relay sets this executor as a task preference instead: `RelayProcess.run` for the
/// listeners' task tree, and `Task(executorPreference:)` for the deliveries that outlive a request.
final class EventLoopExecutor: TaskExecutor {
    static let shared = EventLoopExecutor(group: .singleton)

    private let group: MultiThreadedEventLoopGroup

    init(group: MultiThreadedEventLoopGroup) {
        self.group = group
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        // `any()` is the current loop when called on one, so a task that resumes from I/O stays where it is.
        group.any().execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
