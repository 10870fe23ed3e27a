// libnghttp2 1.52 for Swift. The API is plain functions; only the
// string-literal ALPN identifier needs a callable form.
#ifndef LAMINA_CNGHTTP2_SHIM_H
#define LAMINA_CNGHTTP2_SHIM_H

#include <nghttp2/nghttp2.h>

/// The ALPN protocol list containing only "h2", in wire format ("\x02h2").
static inline const unsigned char *lamina_nghttp2_h2_alpn(void) {
    return (const unsigned char *)NGHTTP2_PROTO_ALPN;
}
static inline unsigned int lamina_nghttp2_h2_alpn_length(void) {
    return (unsigned int)NGHTTP2_PROTO_ALPN_LEN;
}

#endif
