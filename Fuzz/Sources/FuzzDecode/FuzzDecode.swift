import LaminaWireFuzzChecks

/// libFuzzer entry point: feeds the input to a `FrameDecoder` and drains it; traps when
/// the decode property (see `WireFuzzChecks.checkDecode`) does not hold.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDecode(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: start, count: count))
    do {
        try WireFuzzChecks.checkDecode(input)
    } catch {
        fatalError("\(error)")
    }
    return 0
}
