import Foundation
import RelayServer

/// The configuration file: loading any text must give settings or a `ConfigurationError` that names a key, never trap
/// or hang. The environment is empty, so nothing outside the text steers it (no key file, no metadata server is asked:
/// loading only reads).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    do {
        _ = try ConfigurationLoader(environment: [:]).load(yaml: text)
    } catch {
        precondition(!error.key.isEmpty, "a configuration error names no key")
    }
    return 0
}
