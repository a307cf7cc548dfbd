// A stand-in for libmlx5.so.1, for running Debian's perftest binaries over the verbs shim.
// perftest links libmlx5 and libefa for calls it makes only on those NICs (mlx5dv_*, efadv_*);
// the real libraries need libibverbs' private ABI (IBVERBS_PRIVATE_*), which the shim does not
// export, so the dynamic loader would refuse perftest. These entry points only say "no".
#include <stddef.h>

void* mlx5dv_create_mkey(void) { return NULL; }
int mlx5dv_destroy_mkey(void) { return -1; }
void* mlx5dv_qp_ex_from_ibv_qp_ex(void) { return NULL; }
int mlx5dv_crypto_login(void) { return -1; }
void* mlx5dv_dek_create(void) { return NULL; }
int mlx5dv_dek_destroy(void) { return -1; }
void* mlx5dv_create_qp(void) { return NULL; }
int mlx5dv_devx_general_cmd(void) { return -1; }
void* mlx5dv_open_device(void) { return NULL; }
