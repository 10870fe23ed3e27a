import LaminaNodeFuzzChecks

/// libFuzzer entry point: the input as an identity token; traps when the verifier answers
/// anything but claims or an authentication/validation error (`NodeFuzzChecks.checkIdentityToken`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIdentityToken(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: start, count: count))
    do {
        try NodeFuzzChecks.checkIdentityToken(input)
    } catch {
        fatalError("\(error)")
    }
    return 0
}
