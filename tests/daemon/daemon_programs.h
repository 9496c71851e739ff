#pragma once
// The programs the end-to-end tests of a real daemon process start (daemon_test,
// crash_injection_test): the build names them (tests/CMakeLists.txt), and a test target that
// does not stops here.

#ifndef CARMA_BIN
#error "CARMA_BIN must name the carma executable"
#endif
#ifndef CARMA_FAKEJOB_PATH
#error "CARMA_FAKEJOB_PATH must name the carma-fakejob executable"
#endif
