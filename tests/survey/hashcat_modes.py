#!/usr/bin/env python3
"""Write hashcat_modes.tsv: per hash mode, the values hashcat 6.2.6 passes to NVRTC as -D defines
that come from the mode's module (src/modules/module_NNNNN.c): KERN_TYPE, ATTACK_EXEC, DGST_R0..3
(the module's DGST_POS0..3) and DGST_ELEM (its DGST_SIZE / 4). hone-emu-survey reads the table to
compile a kernel file the way hashcat does (src/backend.c, the build options of
load_kernel()/hc_nvrtcCompileProgram). Run once against a checkout of hashcat at the tag Debian
packages:

    tests/survey/hashcat_modes.py /path/to/hashcat v6.2.6 > tests/survey/hashcat_modes.tsv

Only the static constants of each module are read; a module that computes one in code
(module_kern_type_dynamic, for example) keeps its static value here.
"""
import re
import subprocess
import sys

repo, tag = sys.argv[1], sys.argv[2]


def git(*args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout


types_h = git("show", f"{tag}:include/types.h")
dgst_sizes = {}
for name, count, unit in re.findall(r"(DGST_SIZE_\d+_\d+)\s*=\s*\((\d+)\s*\*\s*sizeof\s*\(u(\d+)\)\)", types_h):
    dgst_sizes[name] = int(count) * int(unit) // 8
attack_exec = {"ATTACK_EXEC_OUTSIDE_KERNEL": 10, "ATTACK_EXEC_INSIDE_KERNEL": 11}


def constant(text, name):
    m = re.search(r"static const \w+\s+" + name + r"\s*=\s*([^;]+);", text)
    if not m:
        raise ValueError(f"no {name}")
    return m.group(1).strip()


print("# mode\tkern_type\tattack_exec\tdgst_r0\tdgst_r1\tdgst_r2\tdgst_r3\tdgst_elem"
      f"\t(hashcat {tag}, src/modules; tests/survey/hashcat_modes.py)")
for path in sorted(git("ls-tree", "--name-only", tag, "src/modules/").split()):
    m = re.fullmatch(r"src/modules/module_(\d+)\.c", path)
    if not m:
        continue
    text = git("show", f"{tag}:{path}")
    try:
        row = [str(int(m.group(1))),
               str(int(constant(text, "KERN_TYPE"), 0)),
               str(attack_exec[constant(text, "ATTACK_EXEC")])]
        row += [str(int(constant(text, f"DGST_POS{i}"), 0)) for i in range(4)]
        row.append(str(dgst_sizes[constant(text, "DGST_SIZE")] // 4))
    except (ValueError, KeyError) as e:
        print(f"hashcat_modes: {path}: {e}", file=sys.stderr)
        continue
    print("\t".join(row))
