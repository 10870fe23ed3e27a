import LaminaWireFuzzChecks

/// libFuzzer entry point: the first input bytes choose chunk sizes, the rest is a byte
/// stream; feeding it in those chunks must give the same frames and end as feeding it all
/// at once (see `WireFuzzChecks.checkSplitFeed(fuzzInput:)`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSplitFeed(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: start, count: count))
    do {
        try WireFuzzChecks.checkSplitFeed(fuzzInput: input)
    } catch {
        fatalError("\(error)")
    }
    return 0
}
