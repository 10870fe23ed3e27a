import COpenSSL
import Foundation

/// Self-signed (or CA-signed) ECDSA P-256 certificates for development and tests, made
/// through OpenSSL and written as PEM files (the key with mode 0600).
public enum DevelopmentCertificate {
    /// Creates a key pair and a certificate for `hosts` (DNS names and IP addresses, all
    /// placed in subjectAltName) and writes both files. With `issuer` (certificate and key
    /// PEM paths) the certificate is signed by that CA instead of by itself.
    public static func generate(
        commonName: String = "localhost", hosts: [String] = ["localhost", "127.0.0.1", "::1"], validDays: Int = 365,
        certificatePath: String, privateKeyPath: String,
        issuer: (certificatePath: String, privateKeyPath: String)? = nil
    ) throws {
        guard validDays > 0, validDays <= 3650 else {
            throw TransportError(.crypto, "validDays must be between 1 and 3650")
        }
        OpenSSLError.clearQueue()
        guard let key = lamina_EVP_EC_gen("P-256") else {
            throw OpenSSLError.make(.crypto, "cannot generate a P-256 key")
        }
        defer { EVP_PKEY_free(key) }
        guard let cert = X509_new() else { throw OpenSSLError.make(.crypto, "X509_new failed") }
        defer { X509_free(cert) }

        var issuerCert: OpaquePointer? = nil
        var issuerKey: OpaquePointer? = nil
        defer {
            if let issuerCert { X509_free(issuerCert) }
            if let issuerKey { EVP_PKEY_free(issuerKey) }
        }
        if let issuer {
            issuerCert = try PEM.readCertificate(path: issuer.certificatePath)
            issuerKey = try ECKeys.readPrivateKey(path: issuer.privateKeyPath)
        }

        func check(_ ok: Bool, _ what: String) throws {
            if !ok { throw OpenSSLError.make(.crypto, what) }
        }
        try check(X509_set_version(cert, 2) == 1, "cannot set certificate version")
        let serial = try SecureRandom.bytes(16)
        let serialBN = serial.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 16, nil) }
        try check(serialBN != nil, "cannot make a serial number")
        defer { BN_free(serialBN) }
        try check(BN_to_ASN1_INTEGER(serialBN, X509_get_serialNumber(cert)) != nil, "cannot set serial number")
        try check(X509_gmtime_adj(X509_getm_notBefore(cert), -3600) != nil, "cannot set notBefore")
        try check(X509_gmtime_adj(X509_getm_notAfter(cert), validDays * 86400) != nil, "cannot set notAfter")
        try check(X509_set_pubkey(cert, key) == 1, "cannot set public key")
        let subject = X509_get_subject_name(cert)
        try check(
            X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, commonName, -1, -1, 0) == 1,
            "cannot set common name")
        try check(
            X509_set_issuer_name(cert, issuerCert.map { X509_get_subject_name($0) } ?? subject) == 1,
            "cannot set issuer")

        var v3 = X509V3_CTX()
        X509V3_set_ctx(&v3, issuerCert ?? cert, cert, nil, nil, 0)
        let altNames = hosts.map { TLSConnection.isIPAddress($0) ? "IP:\($0)" : "DNS:\($0)" }.joined(separator: ",")
        var extensions: [(Int32, String)] = [
            (NID_basic_constraints, issuer == nil ? "critical,CA:TRUE" : "critical,CA:FALSE"),
            (NID_key_usage, issuer == nil ? "critical,digitalSignature,keyCertSign" : "critical,digitalSignature"),
            (NID_ext_key_usage, "serverAuth,clientAuth"),
            (NID_subject_key_identifier, "hash"),
        ]
        if !altNames.isEmpty { extensions.append((NID_subject_alt_name, altNames)) }
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &v3, nid, value) else {
                throw OpenSSLError.make(.crypto, "cannot build extension \(value)")
            }
            defer { X509_EXTENSION_free(ext) }
            try check(X509_add_ext(cert, ext, -1) == 1, "cannot add extension \(value)")
        }
        try check(X509_sign(cert, issuerKey ?? key, EVP_sha256()) > 0, "cannot sign certificate")

        let certPEM = try PEM.writeToString({ PEM_write_bio_X509($0, cert) }, what: "certificate")
        let keyPEM = try ECKeys.privateKeyPEM(key)
        try writeFile(certificatePath, certPEM, permissions: 0o644)
        try writeFile(privateKeyPath, keyPEM, permissions: 0o600)
    }

    static func writeFile(_ path: String, _ text: String, permissions: Int) throws {
        let url = URL(fileURLWithPath: path)
        do {
            try Data(text.utf8).write(to: url, options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: path)
        } catch {
            throw TransportError(.io, "cannot write \(path): \(error)")
        }
    }
}
