# Run by cpack (CPACK_PRE_BUILD_SCRIPTS, cmake/package.cmake) after it installed the programs into
# its staging directory: adds what only the Debian package carries, generated from the programs
# just installed there so that none of it can drift from them.
set(stage ${CPACK_TEMPORARY_DIRECTORY})
set(src ${CPACK_CARMA_SOURCE_DIR})
set(version ${CPACK_CARMA_VERSION})
if(NOT EXISTS "${stage}/usr/bin/carma" OR NOT EXISTS "${stage}/usr/bin/carma-daemon")
  message(FATAL_ERROR "deb_files.cmake: no usr/bin/carma in the staging directory ${stage}")
endif()

# The changelog's newest entry is this version, or the package would say another.
file(STRINGS ${src}/packaging/changelog top LIMIT_COUNT 1)
if(NOT top MATCHES "^carma \\(${version}\\) ")
  message(FATAL_ERROR "packaging/changelog starts with '${top}': add an entry for carma (${version})")
endif()

find_program(PYTHON3 python3)
if(NOT PYTHON3)
  message(FATAL_ERROR "python3 is missing (it runs packaging/gen_docs.py): scripts/setup package")
endif()
set(gen ${stage}/../carma-generated)
execute_process(
  COMMAND ${PYTHON3} ${src}/packaging/gen_docs.py --bindir ${stage}/usr/bin --version ${version}
          --out ${gen}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "packaging/gen_docs.py failed (${rc})")
endif()

# The unit of examples/, with the package's paths.
file(READ ${src}/examples/carma.service unit)
string(REGEX REPLACE "^(#[^\n]*\n)+" "" unit "${unit}")
string(REPLACE "/usr/local/bin/" "/usr/bin/" unit "${unit}")
string(REPLACE "[Unit]\n" "[Unit]\nDocumentation=man:carma-daemon(8) man:carma.yaml(5)\n" unit "${unit}")
file(WRITE ${stage}/lib/systemd/system/carma.service
     "# The carma package's unit: enabled on installation, not started; `systemctl start carma`\n"
     "# after reviewing /etc/carma/carma.yaml.\n${unit}")

# file(COPY_FILE), not file(INSTALL): cpack sets DESTDIR, which file(INSTALL) would add again.
foreach(pair carma.yaml:etc/carma/carma.yaml carma.1.gz:usr/share/man/man1/carma.1.gz
        carma-daemon.8.gz:usr/share/man/man8/carma-daemon.8.gz
        carma.yaml.5.gz:usr/share/man/man5/carma.yaml.5.gz
        carma.bash:usr/share/bash-completion/completions/carma)
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 from)
  list(GET pair 1 to)
  get_filename_component(dir ${stage}/${to} DIRECTORY)
  file(MAKE_DIRECTORY ${dir})
  file(COPY_FILE ${gen}/${from} ${stage}/${to})
endforeach()
file(MAKE_DIRECTORY ${stage}/usr/share/doc/carma)
file(COPY_FILE ${src}/packaging/copyright ${stage}/usr/share/doc/carma/copyright)
execute_process(COMMAND gzip -9n -c ${src}/packaging/changelog
                OUTPUT_FILE ${stage}/usr/share/doc/carma/changelog.gz)
# The daemon's state directory as the daemon itself sets it (daemon/daemon.cpp): others may reach
# the socket by name but not list what is inside.
file(MAKE_DIRECTORY ${stage}/var/lib/carma)
file(CHMOD ${stage}/var/lib/carma PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_EXECUTE
     WORLD_EXECUTE)
# Everything else as Debian expects it, whatever the umask of whoever builds the package.
file(GLOB_RECURSE files LIST_DIRECTORIES true ${stage}/*)
foreach(f ${files})
  if(IS_DIRECTORY ${f} AND NOT f STREQUAL "${stage}/var/lib/carma")
    file(CHMOD ${f} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
         WORLD_READ WORLD_EXECUTE)
  elseif(NOT IS_DIRECTORY ${f} AND NOT f MATCHES "/usr/bin/")
    file(CHMOD ${f} PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  endif()
endforeach()
