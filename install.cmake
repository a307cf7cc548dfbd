# cmake --install: the tools in bin/ (with nccl-tests' names for roce-coll-perf), the shim in a
# library folder of its own (lib/roce-stack/: on LD_LIBRARY_PATH it shadows the system's
# libibverbs for those who ask, and for no one else), the collectives library with its headers,
# a pkg-config file (roce_coll.pc) and a CMake package (find_package(roce_coll): roce::coll);
# and CPack's .deb (cpack -G DEB).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

if(ROCE_WITH_DPDK)
  install(TARGETS roce-perf roce-perf-verbs roce-coll-perf roce-pcap roce-sim
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  foreach(_op all_reduce all_gather reduce_scatter broadcast reduce alltoall alltoallv sendrecv)
    install(CODE "file(CREATE_LINK roce-coll-perf
      \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/${_op}_perf\" SYMBOLIC)")
  endforeach()
  install(TARGETS ibverbs LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/roce-stack)
  # The tools find the shim beside them, wherever the prefix is.
  set_target_properties(roce-perf-verbs roce-coll-perf PROPERTIES
    INSTALL_RPATH "\$ORIGIN/../${CMAKE_INSTALL_LIBDIR}/roce-stack")
endif()

if(TARGET roce_coll_shared)
  install(TARGETS roce_coll_shared EXPORT roce_collTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES collectives/communicator.h collectives/config.h collectives/error.h
                collectives/launch_env.h collectives/store.h collectives/types.h
                collectives/reduce.h collectives/roce_coll.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/collectives)
  install(EXPORT roce_collTargets NAMESPACE roce::
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/roce_coll)
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/roce_collConfig.cmake.in [=[
@PACKAGE_INIT@
include(CMakeFindDependencyMacro)
find_dependency(Threads)
include("${CMAKE_CURRENT_LIST_DIR}/roce_collTargets.cmake")
if(NOT TARGET roce::coll)
  add_library(roce::coll ALIAS roce::roce_coll_shared)
endif()
]=])
  configure_package_config_file(${CMAKE_CURRENT_BINARY_DIR}/roce_collConfig.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/roce_collConfig.cmake
    INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/roce_coll)
  write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/roce_collConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/roce_collConfig.cmake
                ${CMAKE_CURRENT_BINARY_DIR}/roce_collConfigVersion.cmake
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/roce_coll)
  # Relocatable: the prefix is found from the file's own place (pkg-config's pcfiledir), so
  # cmake --install --prefix anywhere and a .deb in /usr both work.
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/roce_coll.pc.in [=[
prefix=${pcfiledir}/../..
libdir=${prefix}/@CMAKE_INSTALL_LIBDIR@
includedir=${prefix}/@CMAKE_INSTALL_INCLUDEDIR@

Name: roce_coll
Description: Collectives (AllReduce, AllGather, ReduceScatter, AlltoAll, ...) over RDMA verbs
Version: @PROJECT_VERSION@
Requires.private: libibverbs
Libs: -L${libdir} -lroce_coll
Cflags: -I${includedir}
]=])
  configure_file(${CMAKE_CURRENT_BINARY_DIR}/roce_coll.pc.in
                 ${CMAKE_CURRENT_BINARY_DIR}/roce_coll.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/roce_coll.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME roce-stack)
set(CPACK_PACKAGE_CONTACT "roce-stack maintainers <roce-stack@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Userspace RoCEv2 stack on DPDK, a drop-in libibverbs, and collectives over verbs")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
include(CPack)
