// A stand-in for libefa.so.1 (see mlx5.c).
#include <stddef.h>

void* efadv_create_qp_ex(void) { return NULL; }
int efadv_query_device(void) { return -1; }
