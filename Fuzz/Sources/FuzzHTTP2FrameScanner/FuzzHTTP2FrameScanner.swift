import LaminaNodeFuzzChecks

/// libFuzzer entry point: the input as a role and read size (first byte) and an inbound HTTP/2
/// byte stream; traps when the frame scanner breaks `NodeFuzzChecks.checkHTTP2FrameScanner`'s
/// property.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP2FrameScanner(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: start, count: count))
    do {
        try NodeFuzzChecks.checkHTTP2FrameScanner(input)
    } catch {
        fatalError("\(error)")
    }
    return 0
}
