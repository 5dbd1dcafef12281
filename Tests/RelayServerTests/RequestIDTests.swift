import Testing

@testable import RelayServer

/// The request ids the relay makes: 32 lowercase hex digits, never the same twice in a process, even across threads,
/// and with no visible pattern from one to the next (the counter behind them does not show).
@Test func madeRequestIDsAreHexUniqueAndUnpatterned() async {
    let ids = await withTaskGroup(of: [String].self) { group in
        for _ in 0..<4 { group.addTask { (0..<5_000).map { _ in RequestLogMiddleware.makeID() } } }
        return await group.reduce(into: [String]()) { $0 += $1 }
    }
    #expect(ids.count == 20_000)
    #expect(Set(ids).count == ids.count)
    #expect(ids.allSatisfy { $0.utf8.count == 32 && $0.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) } })
    // Consecutive ids share about half their bits, as any two random ones do, in both halves.
    let sequential = (0..<1_000).map { _ in RequestLogMiddleware.makeID() }
    for half in [0, 16] {
        let differing = zip(sequential, sequential.dropFirst()).map { a, b in
            let x = UInt64(a.dropFirst(half).prefix(16), radix: 16)!
            let y = UInt64(b.dropFirst(half).prefix(16), radix: 16)!
            return (x ^ y).nonzeroBitCount
        }
        let mean = Double(differing.reduce(0, +)) / Double(differing.count)
        #expect((28.0...36.0).contains(mean), "half at \(half): \(mean) bits differ on average")
    }
}
