import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import DeliveryEngine

/// The engine's workers: every job runs exactly once, workers are reused and bounded, and a stop waits for the jobs
/// under way and refuses new ones.
@Suite struct DeliveryTasksTests {
    /// Counts runs per job, and lets a test hold jobs open until it says.
    final class Ledger: Sendable {
        private let runs = NIOLockedValueBox<[Int: Int]>([:])
        let gate = Settlement<Bool>()

        func ran(_ id: Int) { runs.withLockedValue { $0[id, default: 0] += 1 } }
        var counts: [Int: Int] { runs.withLockedValue { $0 } }
    }

    @Test func everyJobAddedFromManyTasksRunsExactlyOnce() async {
        let tasks = DeliveryTasks()
        let ledger = Ledger()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await tasks.run() }
            await withTaskGroup(of: Void.self) { senders in
                for sender in 0..<8 {
                    senders.addTask {
                        for job in 0..<250 { #expect(tasks.add { ledger.ran(sender * 1000 + job) }) }
                    }
                }
            }
            while ledger.counts.count < 2000 { await Task.yield() }
            tasks.close()
        }
        #expect(ledger.counts.count == 2000)
        #expect(ledger.counts.values.allSatisfy { $0 == 1 })
    }

    @Test func idleWorkersAreReusedAndBounded() async {
        let tasks = DeliveryTasks()
        let ledger = Ledger()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await tasks.run() }
            // More jobs at once than workers may idle: each holds its worker until the gate opens.
            let held = DeliveryTasks.maximumIdle + 40
            let started = NIOLockedValueBox(0)
            for id in 0..<held {
                #expect(
                    tasks.add {
                        started.withLockedValue { $0 += 1 }
                        _ = await ledger.gate.value(within: .seconds(3600), on: SystemDeliveryClock())
                        ledger.ran(id)
                    })
            }
            while started.withLockedValue({ $0 }) < held { await Task.yield() }
            ledger.gate.settle(true)
            while ledger.counts.count < held || tasks.idleWorkers < DeliveryTasks.maximumIdle { await Task.yield() }
            #expect(tasks.idleWorkers == DeliveryTasks.maximumIdle)  // the rest ended
            // A job now goes to an idle worker: no new one is needed.
            #expect(tasks.add { ledger.ran(-1) })
            while ledger.counts[-1] == nil { await Task.yield() }
            while tasks.idleWorkers < DeliveryTasks.maximumIdle { await Task.yield() }
            tasks.close()
        }
        #expect(tasks.idleWorkers == 0)
    }

    @Test func aStopWaitsForJobsUnderWayAndRefusesNewOnes() async {
        let tasks = DeliveryTasks()
        let ledger = Ledger()
        let clock = ManualDeliveryClock()
        let ended = NIOLockedValueBox(false)
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await tasks.run()
                ended.withLockedValue { $0 = true }
            }
            #expect(
                tasks.add {
                    await clock.sleep(for: .seconds(5))
                    ledger.ran(1)
                })
            await clock.waitForPending()
            tasks.close()
            #expect(!tasks.add { ledger.ran(2) })
            #expect(!ended.withLockedValue { $0 })  // the job under way holds the stop
            clock.advance(by: .seconds(5))
        }
        #expect(ended.withLockedValue { $0 })
        #expect(ledger.counts == [1: 1])
    }
}
