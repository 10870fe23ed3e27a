import LaminaNodeFuzzChecks

/// libFuzzer entry point: the input as content request header lines; traps when the
/// upload-header or byte-range property (see `NodeFuzzChecks.checkContentHeaders`) fails.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzContentHeaders(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: start, count: count))
    do {
        try NodeFuzzChecks.checkContentHeaders(input)
    } catch {
        fatalError("\(error)")
    }
    return 0
}
