# Injected by tools/bootstrap (CMAKE_PROJECT_INCLUDE) when building interface
# packages against the ROS 2 wheels from PyPI. Not used on a ROS distro.
#
# Why: the wheels' exported *__rosidl_generator_py targets carry the include
# directories of the machine that built them (/opt/python/cp3XY-cp3XY/...).
# CMake refuses to generate with non-existent INTERFACE_INCLUDE_DIRECTORIES,
# so the stale entries are mapped to this interpreter's and numpy's include
# directories. Only the in-memory imported targets are changed; nothing in
# site-packages is edited.
#
# Inputs (cache variables set by tools/bootstrap):
#   ROS_WHEELS_PYTHON_INCLUDE_DIR  e.g. /usr/include/python3.11
#   ROS_WHEELS_NUMPY_INCLUDE_DIR   e.g. <venv>/lib/python3.11/site-packages/numpy/_core/include

if(NOT ROS_WHEELS_PYTHON_INCLUDE_DIR OR NOT ROS_WHEELS_NUMPY_INCLUDE_DIR)
  message(FATAL_ERROR
    "ros_wheels_fixup.cmake needs ROS_WHEELS_PYTHON_INCLUDE_DIR and ROS_WHEELS_NUMPY_INCLUDE_DIR")
endif()

function(_ros_wheels_map_stale_includes)
  # Imported targets exist only once find_package() has run, hence the deferred
  # call below; CMake checks the paths at generate time, after this runs.
  get_property(_targets DIRECTORY "${CMAKE_SOURCE_DIR}" PROPERTY IMPORTED_TARGETS)
  set(_mapped 0)
  foreach(_target IN LISTS _targets)
    get_target_property(_dirs "${_target}" INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT _dirs)
      continue()
    endif()
    set(_new_dirs "")
    set(_changed FALSE)
    foreach(_dir IN LISTS _dirs)
      if(NOT _dir MATCHES "^/opt/python/" OR EXISTS "${_dir}")
        list(APPEND _new_dirs "${_dir}")
      elseif(_dir MATCHES "/numpy/(_core/|core/)?include$")
        list(APPEND _new_dirs "${ROS_WHEELS_NUMPY_INCLUDE_DIR}")
        set(_changed TRUE)
      elseif(_dir MATCHES "/include/python3\\.[0-9]+$")
        list(APPEND _new_dirs "${ROS_WHEELS_PYTHON_INCLUDE_DIR}")
        set(_changed TRUE)
      else()
        # Unknown layout: keep it so CMake's own error names the path.
        list(APPEND _new_dirs "${_dir}")
      endif()
    endforeach()
    if(_changed)
      list(REMOVE_DUPLICATES _new_dirs)
      set_target_properties("${_target}" PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_new_dirs}")
      math(EXPR _mapped "${_mapped} + 1")
    endif()
  endforeach()
  message(STATUS "ros_wheels_fixup: mapped build-machine include paths of ${_mapped} imported targets")
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _ros_wheels_map_stale_includes)
