// libpq (Debian's libpq-dev: PostgreSQL's reference client library, pipeline mode since 14),
// for the PostgreSQL store's libpq driver (Sources/LaminaStore/PostgreSQL/Libpq*.swift).
#ifndef LAMINA_CLIBPQ_SHIM_H
#define LAMINA_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#include <poll.h>
#endif
