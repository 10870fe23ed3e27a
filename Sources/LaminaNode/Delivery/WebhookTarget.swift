import Foundation
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

/// A webhook's `target_url`, checked: `https://host[:port]/path[?query]`, and where it may
/// point. Targets on loopback, private, link-local, unique-local, multicast or unspecified
/// addresses, or on any address of the node's own interfaces (`getifaddrs`, read at each
/// check), are refused unless the operator allows them; names are resolved and every address
/// checked, at creation and again before each connection, which then goes to the address just
/// checked (a name that changes, DNS rebinding, gains nothing).
struct WebhookTarget: Sendable, Hashable {
    var host: String
    var port: Int
    /// The request target: path and query.
    var path: String

    /// Parses `url`; the reason when it is not a usable https URL.
    static func parse(_ url: String) -> Result<WebhookTarget, WebhookTargetError> {
        guard url.utf8.count <= WebhookLimits.maxTargetURLBytes else {
            return .failure(.init("target_url is longer than \(WebhookLimits.maxTargetURLBytes) bytes"))
        }
        guard let components = URLComponents(string: url), components.scheme?.lowercased() == "https" else {
            return .failure(.init("target_url must be an https:// URL"))
        }
        guard var host = components.host else { return .failure(.init("target_url has no host")) }
        if host.hasPrefix("["), host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
            guard isIPv6(host) else { return .failure(.init("target_url has an invalid IPv6 address")) }
        } else if host.contains(":") {
            return .failure(.init("target_url has an invalid host"))
        }
        guard !host.isEmpty else { return .failure(.init("target_url has no host")) }
        guard components.user == nil, components.password == nil else {
            return .failure(.init("target_url must not carry credentials"))
        }
        guard components.fragment == nil else { return .failure(.init("target_url must not have a fragment")) }
        let port = components.port ?? 443
        guard (1...65_535).contains(port) else { return .failure(.init("target_url has an invalid port")) }
        var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { path += "?\(query)" }
        return .success(WebhookTarget(host: host.lowercased(), port: port, path: path))
    }

    /// `host:port` (the unit of the in-flight bound).
    var authority: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// The addresses to connect to: the host's, each allowed (or `allowPrivate`); the reason
    /// otherwise. A name is resolved on NIO's blocking-work thread pool, never on the
    /// cooperative pool (a slow resolver must not stall the node's tasks).
    func addresses(allowPrivate: Bool) async -> Result<[String], WebhookTargetError> {
        let host = self.host
        let resolved: [String]
        if Self.isIPv4(host) || host.contains(":") {
            resolved = [host]
        } else {
            do { resolved = try await NIOThreadPool.singleton.runIfActive { Self.resolve(host) } } catch {
                return .failure(.init("\(host) could not be resolved: \(error)"))
            }
        }
        return Self.check(resolved, host: host, allowPrivate: allowPrivate)
    }

    static func check(
        _ resolved: [String], host: String, allowPrivate: Bool, own: Set<String> = ownAddresses()
    ) -> Result<[String], WebhookTargetError> {
        guard !resolved.isEmpty else { return .failure(.init("\(host) does not resolve")) }
        guard !allowPrivate else { return .success(resolved) }
        if let inside = resolved.first(where: Self.isInternal) {
            return .failure(.init("\(host) is on an internal address (\(inside)); the node refuses private targets"))
        }
        if let mine = resolved.first(where: { canonical($0).map(own.contains) ?? true }) {
            return .failure(
                .init("\(host) is on an address of this node (\(mine)); the node refuses private targets"))
        }
        return .success(resolved)
    }

    /// Every address of the node's interfaces, canonical (``canonical(_:)``).
    static func ownAddresses() -> Set<String> {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var out: Set<String> = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            cursor = entry.pointee.ifa_next
            guard let address = entry.pointee.ifa_addr else { continue }
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    var a = sin.pointee.sin_addr
                    _ = inet_ntop(AF_INET, &a, &buffer, socklen_t(buffer.count))
                }
            case AF_INET6:
                address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin in
                    var a = sin.pointee.sin6_addr
                    _ = inet_ntop(AF_INET6, &a, &buffer, socklen_t(buffer.count))
                }
            default: continue
            }
            let text = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if let canonical = canonical(text) { out.insert(canonical) }
        }
        return out
    }

    /// One text per address: inet_ntop's form, an IPv4-mapped IPv6 address as its IPv4 address;
    /// nil when `address` is not one.
    static func canonical(_ address: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        var v4 = in_addr()
        if inet_pton(AF_INET, address, &v4) == 1 {
            _ = inet_ntop(AF_INET, &v4, &buffer, socklen_t(buffer.count))
        } else {
            var v6 = in6_addr()
            let bare = address.split(separator: "%", maxSplits: 1).first.map(String.init) ?? address
            guard inet_pton(AF_INET6, bare, &v6) == 1 else { return nil }
            let b = withUnsafeBytes(of: v6) { Array($0) }
            if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xff && b[11] == 0xff {
                return "\(b[12]).\(b[13]).\(b[14]).\(b[15])"
            }
            _ = inet_ntop(AF_INET6, &v6, &buffer, socklen_t(buffer.count))
        }
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The host's addresses (an IP literal is its own), as text.
    static func resolve(_ host: String) -> [String] {
        if isIPv4(host) || host.contains(":") { return [host] }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(list) }
        var out: [String] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            if entry.pointee.ai_family == AF_INET {
                entry.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    var a = sin.pointee.sin_addr
                    _ = inet_ntop(AF_INET, &a, &buffer, socklen_t(buffer.count))
                }
            } else if entry.pointee.ai_family == AF_INET6 {
                entry.pointee.ai_addr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin in
                    var a = sin.pointee.sin6_addr
                    _ = inet_ntop(AF_INET6, &a, &buffer, socklen_t(buffer.count))
                }
            }
            let text = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if !text.isEmpty, !out.contains(text) { out.append(text) }
            cursor = entry.pointee.ai_next
        }
        return out
    }

    static func isIPv6(_ s: String) -> Bool {
        var a = in6_addr()
        return inet_pton(AF_INET6, s, &a) == 1
    }

    static func isIPv4(_ s: String) -> Bool {
        var a = in_addr()
        return inet_pton(AF_INET, s, &a) == 1
    }

    /// Whether an address is loopback, private (RFC 1918), shared (RFC 6598), link-local,
    /// unique-local, multicast, broadcast or unspecified.
    static func isInternal(_ address: String) -> Bool {
        var v4 = in_addr()
        if inet_pton(AF_INET, address, &v4) == 1 {
            return isInternalIPv4(withUnsafeBytes(of: v4.s_addr) { Array($0) })
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, address, &v6) == 1 else { return true }  // not an address: refuse
        let b = withUnsafeBytes(of: v6) { Array($0) }
        if b.allSatisfy({ $0 == 0 }) { return true }  // ::
        if b[0..<15].allSatisfy({ $0 == 0 }) && b[15] == 1 { return true }  // ::1
        if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xff && b[11] == 0xff {
            return isInternalIPv4(Array(b[12..<16]))
        }
        if b[0] & 0xfe == 0xfc { return true }  // fc00::/7
        if b[0] == 0xfe && b[1] & 0xc0 == 0x80 { return true }  // fe80::/10
        if b[0] == 0xff { return true }  // multicast
        return false
    }

    private static func isInternalIPv4(_ b: [UInt8]) -> Bool {
        switch (b[0], b[1]) {
        case (0, _), (10, _), (127, _): return true
        case (100, 64...127): return true
        case (169, 254): return true
        case (172, 16...31): return true
        case (192, 168): return true
        case (224...255, _): return true
        default: return false
        }
    }
}

/// Why a target cannot be used.
struct WebhookTargetError: Error, Sendable, CustomStringConvertible {
    var reason: String
    init(_ reason: String) { self.reason = reason }
    var description: String { reason }
}
