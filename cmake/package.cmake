# The Debian package (issue 24, item 1): scripts/package, or in a build directory whose programs
# are built, `cpack --config CPackConfig.cmake`. `cmake --install` is left as it was (the four
# programs); what only the package carries is added to CPack's staging directory by
# cmake/deb_files.cmake: the systemd unit, /etc/carma/carma.yaml, /var/lib/carma, the man pages
# and the bash completion, the last three generated from the programs (packaging/gen_docs.py).
set(CARMA_DEB_MAINTAINER "CARMA maintainers <maintainers@users.noreply.a-seed-cc9e099e.example>"
    CACHE STRING "The Maintainer field of the Debian package")

# cpack builds the target preinstall first, which would build everything (tests and benchmarks
# of a test build): packaging takes the programs as they are built. (The target install then
# does not build either; `cmake --install` never did.)
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME carma)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "collocation-aware GPU resource manager for shared GPU servers")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "CARMA queues deep-learning training tasks on a multi-GPU server and places
them on GPUs that are already busy when that is safe, from what it learns of
each task's memory and utilisation, relaunching a task that runs out of memory.
It runs as a daemon (carma serve) with a command line for users (carma submit,
queue, top, acct, ...), a read-only web page and Prometheus metrics, on NVIDIA
GPUs through DCGM or NVML, or on emulated GPUs for trying it out.")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CARMA_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Depends from the shared libraries the programs link (dpkg-shlibdeps).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The completion in /usr/share/bash-completion/completions is loaded by bash-completion only.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS bash-completion)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/packaging/postinst ${CMAKE_SOURCE_DIR}/packaging/prerm
    ${CMAKE_SOURCE_DIR}/packaging/postrm ${CMAKE_SOURCE_DIR}/packaging/conffiles)
set(CPACK_PRE_BUILD_SCRIPTS ${CMAKE_SOURCE_DIR}/cmake/deb_files.cmake)
# For cmake/deb_files.cmake, which runs inside cpack.
set(CPACK_CARMA_SOURCE_DIR ${CMAKE_SOURCE_DIR})
set(CPACK_CARMA_VERSION ${PROJECT_VERSION})
include(CPack)
