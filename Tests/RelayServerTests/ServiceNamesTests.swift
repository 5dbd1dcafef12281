import Logging
import ServiceLifecycle
import Testing

@testable import RelayServer

/// The service groups name each service by its type. swift-service-lifecycle's default name is the service printed
/// whole, by reflection, as the group is built: the relay's router and configuration, a fifth of the CPU from process
/// start to the first webhook (docs/performance.md, "At the start").
struct ServiceNamesTests {
    @Test func aServiceIsNamedByItsTypeNotPrintedWhole() {
        let process = RelayProcess(services: [], logger: Logger(label: "test"), stopWithin: .seconds(1))
        #expect(ServiceGroupConfiguration.ServiceConfiguration.named(process).serviceName == "RelayProcess")
        // What the library's default would have named it.
        #expect(ServiceGroupConfiguration.ServiceConfiguration(service: process).serviceName.hasPrefix("RelayProcess(services: []"))
    }
}
