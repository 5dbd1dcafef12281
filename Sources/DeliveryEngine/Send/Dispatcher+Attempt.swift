import Foundation
import Logging
import Metrics
import NIOCore
import RelayCore
import Tracing

/// One request: the fence and the versions the destination accepted asked right before it starts, then the sender.
extension Dispatcher {
    /// One request, within the outbound limit: asked of the fence and the versions accepted right before it starts.
    func attempt(
        _ ping: Ping, _ version: Int64, _ sender: any MessageSender, _ validateOnly: Bool, _ supersedes: Bool,
        _ fence: (@Sendable (String) async -> String?)?, _ logger: Logger
    ) async -> Attempt {
        await limit.run { () async -> Attempt in
            // Before the request: a replica that another took the project over from (it was paused) sends nothing
            // more, and no request starts for a version older than one its destination accepted already. The fence is
            // asked again by the sender once its credentials are in hand (a token exchange can take seconds), right
            // before each request leaves, the retry after a 401 included.
            if let fence, let refusal = await fence(ping.project) { return .fenced(refusal) }
            if supersedes {
                switch latest.start(ping, version: version, now: clock.now()) {
                case .behind: return .behind
                case .underWay: return .underWay
                case .go: break
                }
            }
            // Each request is said before it starts, with the replica, the audience and the attempt: a request still
            // under way when its process dies is in the log too (docs/replicas.md: which replica sent a ping). At
            // debug: at info a webhook's log is its decision alone, one line per ping (docs/operations.md).
            logger.debug("sending ping to \(sender.service)")
            let started = clock.instant()
            defer { metrics.sends(sender).latency.record(duration: clock.instant() - started) }
            let project = ping.project
            let gate: RequestGate
            if let fence { gate = { await fence(project) } } else { gate = { nil } }
            do throws(SendFailure) {
                return .sent(.success(try await sender.send(ping.payload, project: project, validateOnly: validateOnly, beforeRequest: gate)))
            } catch {
                if error.kind == .withheld { return .fenced(error.description) }
                return .sent(.failure(error))
            }
        }
    }
}
