/* The header compiles alone (nothing included before it), as C99 and as C++17
 * (`-x c++`), with every warning an error; and twice (include guard). */
#include "devipc.h"
#include "devipc.h"

int main(void) {
    devipc_export_options opts = {sizeof(devipc_export_options), DEVIPC_EXPORT_ANY_PROCESS};
    devipc_status s = DEVIPC_ERR_NULL_ARGUMENT;
    (void)opts;
    return (s < 0 && DEVIPC_ABI_VERSION_MAJOR == 0) ? 0 : 1;
}
