// A pass-through SQLite VFS that joins a commit's WAL writes into one (lamina_sqlite_wal.h).
//
// SQLite writes each WAL frame as two writes, a 24-byte header and the page, one after the
// other in the file: a commit of n pages is 2n `pwrite`s and then a sync. Inside a joining
// scope, writes to a WAL file that continue where the gathered ones end are copied into a
// buffer instead; anything else done to that file first writes the buffer out (one `pwrite`).
// Readers only read frames a commit made visible, and a joining connection syncs every
// commit before making it visible, so they never miss a gathered frame; the connection
// itself reads its WAL only through this file, which writes first.

#include "lamina_sqlite_wal.h"

#include <pthread.h>
#include <sqlite3.h>
#include <string.h>

// At most what the unix VFS writes in one call: its `seekAndWriteFd` keeps the low 17 bits
// of a write's size ("callers never write more than 128KiB at once").
enum { JOIN_CAPACITY = 0x1ffff };

typedef struct JoinFile {
    sqlite3_file base;
    sqlite3_file *real;
    int isWal;
    unsigned char *buffer;  // JOIN_CAPACITY bytes once a write was gathered
    int length;             // gathered bytes, written at `start`
    sqlite3_int64 start;
} JoinFile;

static sqlite3_vfs *realVfs;
static sqlite3_vfs joinVfs;
static sqlite3_io_methods joinMethods[3];  // for real files of io-methods version 1, 2 and 3
static int realOffset;                     // where the real file lives after our struct

static _Thread_local int joinDepth;
static _Thread_local JoinFile *joinPending;  // the file whose buffer holds bytes, on this thread

static _Thread_local unsigned long long requestedWrites;
static _Thread_local unsigned long long issuedWrites;

static int writeJoined(JoinFile *p) {
    if (p->length == 0) return SQLITE_OK;
    int length = p->length;
    p->length = 0;
    if (joinPending == p) joinPending = NULL;
    issuedWrites += 1;
    return p->real->pMethods->xWrite(p->real, p->buffer, length, p->start);
}

// ---- io methods: each writes what is gathered, then passes the call through ----

static int joinClose(sqlite3_file *f) {
    JoinFile *p = (JoinFile *)f;
    int rc = writeJoined(p);
    sqlite3_free(p->buffer);
    p->buffer = NULL;
    int closed = p->real->pMethods->xClose(p->real);
    return rc != SQLITE_OK ? rc : closed;
}

static int joinRead(sqlite3_file *f, void *data, int amount, sqlite3_int64 offset) {
    JoinFile *p = (JoinFile *)f;
    int rc = writeJoined(p);
    if (rc != SQLITE_OK) return SQLITE_IOERR_READ;
    return p->real->pMethods->xRead(p->real, data, amount, offset);
}

static int joinWrite(sqlite3_file *f, const void *data, int amount, sqlite3_int64 offset) {
    JoinFile *p = (JoinFile *)f;
    if (!p->isWal) return p->real->pMethods->xWrite(p->real, data, amount, offset);
    requestedWrites += 1;
    if (joinDepth > 0 && amount > 0 && amount <= JOIN_CAPACITY) {
        if (p->length > 0 && offset == p->start + p->length && p->length + amount <= JOIN_CAPACITY) {
            memcpy(p->buffer + p->length, data, (size_t)amount);
            p->length += amount;
            return SQLITE_OK;
        }
        int rc = writeJoined(p);
        if (rc != SQLITE_OK) return rc;
        if (joinPending != NULL && joinPending != p) {
            rc = writeJoined(joinPending);
            if (rc != SQLITE_OK) return rc;
        }
        if (p->buffer == NULL) p->buffer = sqlite3_malloc(JOIN_CAPACITY);
        if (p->buffer != NULL) {
            memcpy(p->buffer, data, (size_t)amount);
            p->start = offset;
            p->length = amount;
            joinPending = p;
            return SQLITE_OK;
        }
    } else {
        int rc = writeJoined(p);
        if (rc != SQLITE_OK) return rc;
    }
    issuedWrites += 1;
    return p->real->pMethods->xWrite(p->real, data, amount, offset);
}

static int joinTruncate(sqlite3_file *f, sqlite3_int64 size) {
    JoinFile *p = (JoinFile *)f;
    int rc = writeJoined(p);
    if (rc != SQLITE_OK) return rc;
    return p->real->pMethods->xTruncate(p->real, size);
}

static int joinSync(sqlite3_file *f, int flags) {
    JoinFile *p = (JoinFile *)f;
    int rc = writeJoined(p);
    if (rc != SQLITE_OK) return rc;
    return p->real->pMethods->xSync(p->real, flags);
}

static int joinFileSize(sqlite3_file *f, sqlite3_int64 *size) {
    JoinFile *p = (JoinFile *)f;
    int rc = writeJoined(p);
    if (rc != SQLITE_OK) return rc;
    return p->real->pMethods->xFileSize(p->real, size);
}

static int joinLock(sqlite3_file *f, int lock) {
    JoinFile *p = (JoinFile *)f;
    int rc = writeJoined(p);
    if (rc != SQLITE_OK) return rc;
    return p->real->pMethods->xLock(p->real, lock);
}

static int joinUnlock(sqlite3_file *f, int lock) {
    JoinFile *p = (JoinFile *)f;
    int rc = writeJoined(p);
    if (rc != SQLITE_OK) return rc;
    return p->real->pMethods->xUnlock(p->real, lock);
}

static int joinCheckReservedLock(sqlite3_file *f, int *out) {
    JoinFile *p = (JoinFile *)f;
    return p->real->pMethods->xCheckReservedLock(p->real, out);
}

static int joinFileControl(sqlite3_file *f, int op, void *arg) {
    JoinFile *p = (JoinFile *)f;
    int rc = writeJoined(p);
    if (rc != SQLITE_OK) return rc;
    return p->real->pMethods->xFileControl(p->real, op, arg);
}

static int joinSectorSize(sqlite3_file *f) {
    JoinFile *p = (JoinFile *)f;
    return p->real->pMethods->xSectorSize(p->real);
}

static int joinDeviceCharacteristics(sqlite3_file *f) {
    JoinFile *p = (JoinFile *)f;
    return p->real->pMethods->xDeviceCharacteristics(p->real);
}

static int joinShmMap(sqlite3_file *f, int region, int size, int extend, void volatile **out) {
    JoinFile *p = (JoinFile *)f;
    return p->real->pMethods->xShmMap(p->real, region, size, extend, out);
}

static int joinShmLock(sqlite3_file *f, int offset, int n, int flags) {
    JoinFile *p = (JoinFile *)f;
    return p->real->pMethods->xShmLock(p->real, offset, n, flags);
}

static void joinShmBarrier(sqlite3_file *f) {
    JoinFile *p = (JoinFile *)f;
    p->real->pMethods->xShmBarrier(p->real);
}

static int joinShmUnmap(sqlite3_file *f, int deleteFlag) {
    JoinFile *p = (JoinFile *)f;
    return p->real->pMethods->xShmUnmap(p->real, deleteFlag);
}

static int joinFetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **out) {
    JoinFile *p = (JoinFile *)f;
    int rc = writeJoined(p);
    if (rc != SQLITE_OK) return rc;
    return p->real->pMethods->xFetch(p->real, offset, amount, out);
}

static int joinUnfetch(sqlite3_file *f, sqlite3_int64 offset, void *page) {
    JoinFile *p = (JoinFile *)f;
    return p->real->pMethods->xUnfetch(p->real, offset, page);
}

// ---- the VFS: opening wraps the real file; everything else is the real VFS's ----

static int joinOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *outFlags) {
    (void)vfs;
    JoinFile *p = (JoinFile *)f;
    memset(p, 0, sizeof(JoinFile));
    p->real = (sqlite3_file *)((char *)p + realOffset);
    int rc = realVfs->xOpen(realVfs, name, p->real, flags, outFlags);
    if (p->real->pMethods == NULL) {
        p->base.pMethods = NULL;
        return rc;
    }
    int version = p->real->pMethods->iVersion;
    if (version < 1) version = 1;
    if (version > 3) version = 3;
    p->base.pMethods = &joinMethods[version - 1];
    p->isWal = (flags & SQLITE_OPEN_WAL) != 0;
    return rc;
}

static int joinDelete(sqlite3_vfs *v, const char *name, int syncDir) {
    (void)v;
    return realVfs->xDelete(realVfs, name, syncDir);
}

static int joinAccess(sqlite3_vfs *v, const char *name, int flags, int *out) {
    (void)v;
    return realVfs->xAccess(realVfs, name, flags, out);
}

static int joinFullPathname(sqlite3_vfs *v, const char *name, int n, char *out) {
    (void)v;
    return realVfs->xFullPathname(realVfs, name, n, out);
}

static void *joinDlOpen(sqlite3_vfs *v, const char *name) {
    (void)v;
    return realVfs->xDlOpen(realVfs, name);
}

static void joinDlError(sqlite3_vfs *v, int n, char *out) {
    (void)v;
    realVfs->xDlError(realVfs, n, out);
}

static void (*joinDlSym(sqlite3_vfs *v, void *handle, const char *symbol))(void) {
    (void)v;
    return realVfs->xDlSym(realVfs, handle, symbol);
}

static void joinDlClose(sqlite3_vfs *v, void *handle) {
    (void)v;
    realVfs->xDlClose(realVfs, handle);
}

static int joinRandomness(sqlite3_vfs *v, int n, char *out) {
    (void)v;
    return realVfs->xRandomness(realVfs, n, out);
}

static int joinSleep(sqlite3_vfs *v, int microseconds) {
    (void)v;
    return realVfs->xSleep(realVfs, microseconds);
}

static int joinCurrentTime(sqlite3_vfs *v, double *out) {
    (void)v;
    return realVfs->xCurrentTime(realVfs, out);
}

static int joinGetLastError(sqlite3_vfs *v, int n, char *out) {
    (void)v;
    return realVfs->xGetLastError ? realVfs->xGetLastError(realVfs, n, out) : 0;
}

static int joinCurrentTimeInt64(sqlite3_vfs *v, sqlite3_int64 *out) {
    (void)v;
    return realVfs->xCurrentTimeInt64(realVfs, out);
}

static int joinSetSystemCall(sqlite3_vfs *v, const char *name, sqlite3_syscall_ptr call) {
    (void)v;
    return realVfs->xSetSystemCall(realVfs, name, call);
}

static sqlite3_syscall_ptr joinGetSystemCall(sqlite3_vfs *v, const char *name) {
    (void)v;
    return realVfs->xGetSystemCall(realVfs, name);
}

static const char *joinNextSystemCall(sqlite3_vfs *v, const char *name) {
    (void)v;
    return realVfs->xNextSystemCall(realVfs, name);
}

static pthread_once_t registered = PTHREAD_ONCE_INIT;
static int registerResult = SQLITE_OK;

static void registerOnce(void) {
    realVfs = sqlite3_vfs_find(NULL);
    if (realVfs == NULL) {
        registerResult = SQLITE_ERROR;
        return;
    }
    realOffset = (int)((sizeof(JoinFile) + 7) & ~(size_t)7);
    for (int i = 0; i < 3; i++) {
        sqlite3_io_methods *m = &joinMethods[i];
        m->iVersion = i + 1;
        m->xClose = joinClose;
        m->xRead = joinRead;
        m->xWrite = joinWrite;
        m->xTruncate = joinTruncate;
        m->xSync = joinSync;
        m->xFileSize = joinFileSize;
        m->xLock = joinLock;
        m->xUnlock = joinUnlock;
        m->xCheckReservedLock = joinCheckReservedLock;
        m->xFileControl = joinFileControl;
        m->xSectorSize = joinSectorSize;
        m->xDeviceCharacteristics = joinDeviceCharacteristics;
        if (i >= 1) {
            m->xShmMap = joinShmMap;
            m->xShmLock = joinShmLock;
            m->xShmBarrier = joinShmBarrier;
            m->xShmUnmap = joinShmUnmap;
        }
        if (i >= 2) {
            m->xFetch = joinFetch;
            m->xUnfetch = joinUnfetch;
        }
    }
    joinVfs.iVersion = realVfs->iVersion < 3 ? realVfs->iVersion : 3;
    joinVfs.szOsFile = realOffset + realVfs->szOsFile;
    joinVfs.mxPathname = realVfs->mxPathname;
    joinVfs.zName = "lamina-joined-wal";
    joinVfs.xOpen = joinOpen;
    joinVfs.xDelete = joinDelete;
    joinVfs.xAccess = joinAccess;
    joinVfs.xFullPathname = joinFullPathname;
    joinVfs.xDlOpen = joinDlOpen;
    joinVfs.xDlError = joinDlError;
    joinVfs.xDlSym = joinDlSym;
    joinVfs.xDlClose = joinDlClose;
    joinVfs.xRandomness = joinRandomness;
    joinVfs.xSleep = joinSleep;
    joinVfs.xCurrentTime = joinCurrentTime;
    joinVfs.xGetLastError = joinGetLastError;
    if (joinVfs.iVersion >= 2) joinVfs.xCurrentTimeInt64 = joinCurrentTimeInt64;
    if (joinVfs.iVersion >= 3) {
        joinVfs.xSetSystemCall = joinSetSystemCall;
        joinVfs.xGetSystemCall = joinGetSystemCall;
        joinVfs.xNextSystemCall = joinNextSystemCall;
    }
    registerResult = sqlite3_vfs_register(&joinVfs, 1);
}

int lamina_sqlite_wal_register(void) {
    pthread_once(&registered, registerOnce);
    return registerResult;
}

void lamina_sqlite_wal_join_begin(void) { joinDepth += 1; }

int lamina_sqlite_wal_join_end(void) {
    if (joinDepth > 0) joinDepth -= 1;
    if (joinDepth > 0 || joinPending == NULL) return SQLITE_OK;
    return writeJoined(joinPending);
}

void lamina_sqlite_wal_counters(unsigned long long *requested, unsigned long long *issued) {
    *requested = requestedWrites;
    *issued = issuedWrites;
}
