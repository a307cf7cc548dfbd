/* Built against an installed roce_coll through pkg-config: two ranks as threads meet through a
 * file store and AllReduce 1000 doubles (the C API); prints "c_consumer: ok" and exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <collectives/roce_coll.h>

static const char* dir;
static int failures;

static void* rank_main(void* arg) {
  const int rank = (int)(long)arg;
  roce_coll_comm* comm = NULL;
  if (roce_coll_init_file(&comm, rank, 2, dir) != ROCE_COLL_SUCCESS) {
    fprintf(stderr, "c_consumer: rank %d: %s\n", rank, roce_coll_last_error());
    __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
    return NULL;
  }
  double v[1000];
  for (int i = 0; i < 1000; ++i) v[i] = i + rank;
  if (roce_coll_all_reduce(comm, v, v, 1000, ROCE_COLL_FLOAT64, ROCE_COLL_SUM) !=
      ROCE_COLL_SUCCESS) {
    fprintf(stderr, "c_consumer: rank %d: %s\n", rank, roce_coll_last_error());
    __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
  }
  for (int i = 0; i < 1000; ++i) {
    if (v[i] != 2.0 * i + 1) {
      fprintf(stderr, "c_consumer: rank %d: element %d is %g\n", rank, i, v[i]);
      __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
      break;
    }
  }
  roce_coll_destroy(comm);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 2) return 64;
  dir = argv[1];
  pthread_t t[2];
  for (long r = 0; r < 2; ++r) pthread_create(&t[r], NULL, rank_main, (void*)r);
  for (int r = 0; r < 2; ++r) pthread_join(t[r], NULL);
  if (failures) return 1;
  printf("c_consumer: ok\n");
  return 0;
}
