import LaminaWireFuzzChecks

/// libFuzzer entry point: whatever `Frame.decode(exactly:)` accepts must re-encode to the
/// same bytes and decode again to an equal frame (see `WireFuzzChecks.checkRoundTrip`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRoundTrip(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: start, count: count))
    do {
        try WireFuzzChecks.checkRoundTrip(input)
    } catch {
        fatalError("\(error)")
    }
    return 0
}
