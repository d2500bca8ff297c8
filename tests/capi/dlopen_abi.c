/* Loads the library the way a plain C host does (dlopen) and checks its ABI version. */
#include "dhtcrawler.h"

#include <dlfcn.h>
#include <stdio.h>

typedef int (*abi_fn)(void);
typedef const char *(*version_fn)(void);

int main(int argc, char **argv) {
    void *lib;
    abi_fn abi;
    version_fn version;
    if (argc != 2) {
        fprintf(stderr, "usage: %s path/to/libdhtcrawler.so\n", argv[0]);
        return 2;
    }
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    /* Converting through a union keeps -pedantic quiet about object-to-function casts. */
    {
        union { void *p; abi_fn f; } a;
        union { void *p; version_fn f; } v;
        a.p = dlsym(lib, "dhtc_abi_version");
        v.p = dlsym(lib, "dhtc_version");
        abi = a.f;
        version = v.f;
    }
    /* Every function of the header is there by name (the export check compares the lists). */
    if (!dlsym(lib, "dhtc_crawler_create") || !dlsym(lib, "dhtc_store_migrate")) {
        fprintf(stderr, "missing symbols\n");
        return 1;
    }
    if (!abi || !version) {
        fprintf(stderr, "missing symbols\n");
        return 1;
    }
    if (abi() != DHTC_ABI_VERSION) {
        fprintf(stderr, "ABI mismatch: library %d, header %d\n", abi(), DHTC_ABI_VERSION);
        return 1;
    }
    printf("loaded dhtcrawler %s (ABI %d)\n", version(), abi());
    dlclose(lib);
    return 0;
}
