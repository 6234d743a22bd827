"""dace-ai environment pack: FFTW 3 (double and single precision)."""
