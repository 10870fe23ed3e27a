import LaminaNodeFuzzChecks

/// libFuzzer entry point: the input as one Client API WebSocket text message; traps when the
/// packet decoder breaks `NodeFuzzChecks.checkWebSocketPacket`'s property.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebSocketPacket(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: start, count: count))
    do {
        try NodeFuzzChecks.checkWebSocketPacket(input)
    } catch {
        fatalError("\(error)")
    }
    return 0
}
