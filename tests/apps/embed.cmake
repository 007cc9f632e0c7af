# Write a C++ file defining `extern const unsigned char NAME[]` with the bytes of INPUT followed by a NUL
# (PTX and CUDA C++ sources are passed as C strings; a fatbin's own header says how long it is),
# aligned to 8 bytes as the driver expects of fatbins. Run with cmake -P -DINPUT= -DOUTPUT= -DNAME=.
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REPLACE "0x0a," "0x0a,\n" bytes "${bytes}")
file(WRITE "${OUTPUT}" "// Generated from ${INPUT} by embed.cmake: do not edit.\nextern const unsigned char ${NAME}[];\nalignas(8) const unsigned char ${NAME}[] = {\n${bytes}0x00};\n")
