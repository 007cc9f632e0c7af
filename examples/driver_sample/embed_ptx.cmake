# Write a C++ file defining `extern const char NAME[]` with the bytes of INPUT, NUL-terminated
# (cuModuleLoadData takes PTX as a C string). Run with cmake -P -DINPUT= -DOUTPUT= -DNAME=.
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REPLACE "0x0a," "0x0a,\n" bytes "${bytes}") # one line per PTX line
file(WRITE "${OUTPUT}" "// Generated from ${INPUT} by embed_ptx.cmake: do not edit.\nextern const char ${NAME}[];\nconst char ${NAME}[] = {\n${bytes}0x00};\n")
