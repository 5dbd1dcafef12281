import NIOConcurrencyHelpers

/// A value behind a lock, used as `Synchronization.Mutex` would be, but on NIO's pthread lock: the thread sanitizer
/// understands pthread locks, while `Mutex`'s futex on Linux is invisible to it, so every access under one was
/// reported as a race and a real race would have been lost among them. Nothing may await while holding it.
package final class Locked<Value>: @unchecked Sendable {
    private let lock = NIOLock()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
