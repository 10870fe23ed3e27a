import COpenSSL
import NIOCore

/// The `BIO_METHOD` of ``TLSConnection``'s custom BIO, created once per process.
/// Reads come from the connection's inbound `ByteBuffer` (no copy into a staging BIO);
/// writes append to its outbound `ByteBuffer`, so `SSL_write` never wants to write.
nonisolated(unsafe) let byteBufferBIOMethod: OpaquePointer = {
    guard let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "lamina ByteBuffer BIO") else {
        fatalError("OpenSSL could not allocate a BIO_METHOD")
    }
    BIO_meth_set_write(method, bioWrite)
    BIO_meth_set_read(method, bioRead)
    BIO_meth_set_ctrl(method, bioCtrl)
    BIO_meth_set_create(method, { _ in 1 })
    BIO_meth_set_destroy(method, { _ in 1 })
    return method
}()

private func connection(of bio: OpaquePointer?) -> TLSConnection? {
    guard let bio, let raw = BIO_get_data(bio) else { return nil }
    return Unmanaged<TLSConnection>.fromOpaque(raw).takeUnretainedValue()
}

private let bioWrite: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32) -> Int32 = { bio, data, length in
    guard let bio, let data, length >= 0, let owner = connection(of: bio) else { return -1 }
    lamina_BIO_clear_retry_flags(bio)
    owner.appendOutbound(UnsafeRawBufferPointer(start: data, count: Int(length)))
    return length
}

private let bioRead: @convention(c) (OpaquePointer?, UnsafeMutablePointer<CChar>?, Int32) -> Int32 = {
    bio, data, length in
    guard let bio, let data, let owner = connection(of: bio) else { return -1 }
    lamina_BIO_clear_retry_flags(bio)
    if length <= 0 { return 0 }
    let copied = owner.takeInbound(into: UnsafeMutableRawBufferPointer(start: data, count: Int(length)))
    if copied == 0 {
        // Nothing buffered: "try again later", never EOF.
        lamina_BIO_set_retry_read(bio)
        return -1
    }
    return Int32(copied)
}

private let bioCtrl: @convention(c) (OpaquePointer?, Int32, Int, UnsafeMutableRawPointer?) -> Int = {
    bio, command, argument, _ in
    switch command {
    case BIO_CTRL_GET_CLOSE: return Int(BIO_get_shutdown(bio))
    case BIO_CTRL_SET_CLOSE:
        BIO_set_shutdown(bio, Int32(argument))
        return 1
    case BIO_CTRL_FLUSH: return 1
    default: return 0
    }
}
