import Foundation

@testable import RelayServer

/// `openapi.yaml`'s schemas that the generator does not emit, for the tests to read answers by: its filter keeps the
/// operations served through the generated layer, and the webhook's answers, the admin preview and `/healthz` are
/// written outside it (or inline). Mirrored field for field from the document; the parts that are generated
/// (`Delivery`, `Attempt`, ...) are used as they are. The interop tests hold the live answers to the document itself.
enum Contract {
    /// `#/components/schemas/Delivered`: the webhook's `200`.
    struct Delivered: Decodable {
        enum Status: String, Decodable {
            case delivered, failed, superseded
        }
        var status: Status
        var requestId: String
        var duplicate: Bool
        var event: EventSummary
        var deliveries: [Components.Schemas.Delivery]
    }

    /// `#/components/schemas/EventSummary`.
    struct EventSummary: Decodable {
        enum Format: String, Decodable {
            case cloudEventBinary = "cloudevent-binary"
            case cloudEventStructured = "cloudevent-structured"
            case templateVersion = "template-version"
            case pubSub = "pubsub"
        }
        var id: String?
        var format: Format
        var project: String
        var versionNumber: String
        var updateType: String?
    }

    /// `#/components/responses/InProgress`: the webhook's `202`.
    struct InProgress: Decodable {
        enum Status: String, Decodable {
            case inProgress = "in-progress"
        }
        var status: Status
        var requestId: String
        var event: EventSummary
    }

    /// `#/components/schemas/Preview`. A request's `body` is a free-form object (the `messages:send` body), so it is
    /// not mirrored: compare it as JSON.
    struct Preview: Decodable {
        struct Request: Decodable {
            var route: String
            var url: String
        }
        /// `change`.
        struct Change: Decodable {
            struct Parameter: Decodable {
                var name: String
                var kind: String
                var defaultChanged: Bool
                var valueTypeChanged: Bool
                var conditions: [String]
            }
            struct Condition: Decodable {
                var name: String
                var kind: String
            }
            var known: Bool
            var since: String?
            var reason: String?
            var parameters: [Parameter]?
            var conditions: [Condition]?
            var conditionsReordered: Bool?
            var changedParameters: [String]?
        }
        /// `routes[]`.
        struct Decision: Decodable {
            var route: String
            var fires: Bool
            var reason: String
            var targets: [String]
        }
        var project: String
        var versionNumber: String
        var change: Change?
        var routes: [Decision]
        var requests: [Request]
    }

    /// `GET /healthz`'s `200` (an inline schema, generated with the operation).
    typealias Health = Operations.GetHealth.Output.Ok.Body.JsonPayload
}
