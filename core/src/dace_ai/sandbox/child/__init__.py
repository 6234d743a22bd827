"""The sandbox child: runs a candidate (and its native reference) on generated inputs.

Started by :mod:`dace_ai.sandbox.child_process` as ``python -I <this folder>/__main__.py JOB.json``
in a process of its own, with limits it applies to itself before anything else. It
reads only data (the JSON job written by the parent, ``.npy`` files of expected
outputs): never model text as Python. It imports nothing but the standard library and
NumPy (importing DaCe would cost seconds per candidate), and nothing of dace_ai.

Several modules, one per job, rather than one long file:

* :mod:`.records`: the TypedDicts of what crosses the process boundary (the parents import them);
* :mod:`.inputs`: the inputs of a case and the fill pattern of its outputs (the parents import it);
* :mod:`.buffers`: guarded buffers, their lifetimes owned by context managers;
* :mod:`.programs`: the candidate's entry points, a program DaCe built, a NumPy baseline;
* :mod:`.process`: the limits, the phase file, OpenMP's thread count;
* :mod:`.compare`: judging a run's outputs and the bytes around its buffers;
* :mod:`.timing`: the one timing algorithm (interleaved samples), the bandwidth, the bench lock;
* :mod:`.runs`: the candidate's runs of one case; :mod:`.bench_section`: the bench section;
* :mod:`.in_place`: calls after the inputs changed in place; :mod:`.at_once`: calls from several threads at once;
* :mod:`.reuse`: samples kept on disk for the node's next candidate;
* :mod:`.job`: the job from start to end.

Why several files, and how the entry file finds them: since Python 3.11 ``-I`` does not
put the script's folder on ``sys.path``, and putting it (or the folder above, which holds
the other modules of ``dace_ai.sandbox``) there would let those names shadow others. So
``__main__.py`` loads this folder as a package of its own name, ``dace_ai_child``, from
its own location (:func:`importlib.util.spec_from_file_location` with
``submodule_search_locations``), and the modules import each other relatively
(``from .records import SandboxJob``). The same files are ``dace_ai.sandbox.child.*`` in the
parent, where they are ordinary modules of the installed package (a wheel ships them
like any other: they are ``.py`` files of a package). This file imports nothing, so
loading the package costs nothing beyond the modules the child uses.

Buffers live in their own ``mmap`` regions with inaccessible pages right after them
(:mod:`.buffers`); output buffers are pre-filled with a fill pattern, so an element the
candidate did not write is found (:mod:`.inputs`). Before each call the child appends a
line to the *phase file* saying who runs and where the buffers are; if the process dies,
the parent reads the last line to say what crashed, and the fault handler in the
candidate library adds the faulting address to the *fault file*.

Modes: ``verify`` compares the candidate with the reference (or expected outputs);
``time`` times both on the same inputs (warm-up, then repeated samples).
"""
