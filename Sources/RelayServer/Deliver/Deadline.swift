import Synchronization

/// Waiting for a task's value for a bounded time, while the task itself runs on.
enum Deadline {
    /// The task's value if it settles within `wait`, else nil.
    ///
    /// A task group would not do: it waits for all its children, and awaiting another task's value cannot be
    /// cancelled.
    static func value<T: Sendable>(of task: Task<T, Never>, within wait: Duration) async -> T? {
        guard wait > .zero else { return nil }
        return await withCheckedContinuation { continuation in
            let once = ResumeOnce(continuation)
            let timer = Task {
                // Cancelled means the task settled first: only a sleep that ran its course may answer "nil".
                guard (try? await Task.sleep(for: wait)) != nil else { return }
                once.resume(nil)
            }
            Task {
                let value = await task.value
                once.resume(value)
                timer.cancel()
            }
        }
    }
}

/// Resumes a continuation the first time only; whichever of the task and the timer comes first wins.
private final class ResumeOnce<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<T?, Never>?>

    init(_ continuation: CheckedContinuation<T?, Never>) {
        self.continuation = Mutex(continuation)
    }

    func resume(_ value: T?) {
        continuation.withLock { pending in
            pending?.resume(returning: value)
            pending = nil
        }
    }
}
