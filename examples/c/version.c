/* Prints the library's version and ABI, after checking the ABI matches this header. */
#include <dhtcrawler.h>
#include <stdio.h>

int main(void) {
    if (dhtc_abi_version() != DHTC_ABI_VERSION) {
        fprintf(stderr, "libdhtcrawler ABI %d, expected %d\n", dhtc_abi_version(), DHTC_ABI_VERSION);
        return 1;
    }
    printf("dhtcrawler %s (ABI %d)\n", dhtc_version(), dhtc_abi_version());
    return 0;
}
