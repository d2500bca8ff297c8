/* Compiled as strict C99 with -pedantic -Werror: the public header must stay plain C. */
#include "dhtcrawler.h"

#include <stdio.h>
#include <string.h>

int main(void) {
    const char *v = dhtc_version();
    if (v == NULL || strlen(v) < 5) {
        fprintf(stderr, "bad version string\n");
        return 1;
    }
    if (dhtc_abi_version() != DHTC_ABI_VERSION) {
        fprintf(stderr, "ABI mismatch: library %d, header %d\n", dhtc_abi_version(), DHTC_ABI_VERSION);
        return 1;
    }
    printf("dhtcrawler %s (ABI %d)\n", v, dhtc_abi_version());
    return 0;
}
