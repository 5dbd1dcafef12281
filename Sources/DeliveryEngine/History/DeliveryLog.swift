/// Where the admin API and the console read the delivery history: this process's ``DeliveryHistory``, or, with
/// several replicas on a shared store, the store's copy of every replica's.
package protocol DeliveryLog: Sendable {
    /// Newest first.
    func list(_ filter: DeliveryHistory.Filter) async throws -> [DeliveryHistory.Entry]
    func entry(_ id: String) async throws -> DeliveryHistory.Entry?
}

extension DeliveryHistory: DeliveryLog {}

/// Told each change of a history entry (started, waiting, settled) to keep a copy that other replicas read. It is
/// called on the delivery's path, so it only queues the copy and returns.
package protocol DeliveryJournal: Sendable {
    func record(_ entry: DeliveryHistory.Entry)
}
