/// Why the shared store could not answer: the store's own error, whatever keeps it (the seam's, ``Admission``).
package enum StoreError: Error, Sendable, CustomStringConvertible {
    /// No connection, or no answer within the statement timeout: the relay answers 503 and readiness turns false.
    case unavailable(String)
    /// The database answered with an error.
    case failed(String)
    /// The lease the work was decided under was taken over since (fencing): this replica stands down.
    case leaseLost(String)
    /// The store's schema is newer than this relay knows: a newer rc-relay migrated it.
    case schemaTooNew(found: Int, known: Int)

    package var description: String {
        switch self {
        case .unavailable(let reason): "the shared store is unreachable: \(reason)"
        case .failed(let reason): "the shared store refused a statement: \(reason)"
        case .leaseLost(let lease): "the lease \(lease) was taken over by another replica"
        case .schemaTooNew(let found, let known):
            "the store's schema is at version \(found), newer than this rc-relay knows (\(known)); run the newer rc-relay"
        }
    }
}
