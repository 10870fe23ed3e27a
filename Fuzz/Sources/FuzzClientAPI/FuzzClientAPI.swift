import LaminaNodeFuzzChecks

/// libFuzzer entry point: the input as a Client API request (`METHOD target`, header lines, an
/// empty line, the body) answered by a Client API over a real engine and store; traps when the
/// answer breaks `NodeFuzzChecks.checkClientAPIRequest`'s property (or anything on the way traps).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzClientAPI(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: start, count: count))
    do {
        try NodeFuzzChecks.checkClientAPIRequestBlocking(input)
    } catch {
        fatalError("\(error)")
    }
    return 0
}
