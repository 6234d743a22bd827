// dace-ai sanitizers driver: runs a candidate's entry points once on buffers of exactly their size, then (when the
// job asks) from several OpenMP threads at once on one state, each thread on copies of its own of every buffer.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/resource.h>
#ifdef _OPENMP
#include <omp.h>
#endif
extern "C" void* dace_ai_entry_init(const double* symbols);
extern "C" void dace_ai_entry_run(void* state, void** connectors, const double* symbols, const double* params);
extern "C" void dace_ai_entry_exit(void* state, const double* symbols);

static void dace_ai_driver_fail(const char* what) {
    fprintf(stderr, "dace-ai-driver: bad job file: %s\n", what);
    exit(3);
}
static size_t dace_ai_driver_count(FILE* job, const char* key) {
    char word[64];
    size_t n = 0;
    if (fscanf(job, "%63s %zu", word, &n) != 2 || strcmp(word, key) != 0) dace_ai_driver_fail(key);
    return n;
}
static double* dace_ai_driver_values(FILE* job, const char* key) {
    size_t n = dace_ai_driver_count(job, key);
    double* values = (double*) calloc(n + 1, sizeof(double));
    for (size_t i = 0; i < n; ++i)
        if (fscanf(job, "%lf", &values[i]) != 1) dace_ai_driver_fail(key);
    return values;
}

int main(int argc, char** argv) {
    if (argc != 2) dace_ai_driver_fail("usage: driver JOB");
    FILE* job = fopen(argv[1], "r");
    if (!job) dace_ai_driver_fail("cannot open it");
    // CPU time (every thread's), set by the driver itself before any candidate code runs where the parent cannot
    // watch it (0: the parent does); never an address-space limit: the sanitizers reserve terabytes of shadow memory.
    struct rlimit cpu;
    cpu.rlim_cur = (rlim_t) dace_ai_driver_count(job, "cpu_seconds");
    cpu.rlim_max = cpu.rlim_cur + 1;
    struct rlimit core = {0, 0};
    if ((cpu.rlim_cur > 0 && setrlimit(RLIMIT_CPU, &cpu) != 0) || setrlimit(RLIMIT_CORE, &core) != 0)
        dace_ai_driver_fail("limits");
    double* symbols = dace_ai_driver_values(job, "symbols");
    double* params = dace_ai_driver_values(job, "params");
    size_t containers = dace_ai_driver_count(job, "containers");
    unsigned char** buffers = (unsigned char**) calloc(containers + 1, sizeof(unsigned char*));
    size_t* sizes = (size_t*) calloc(containers + 1, sizeof(size_t));
    for (size_t i = 0; i < containers; ++i) {
        size_t bytes = 0;
        char name[256];
        if (fscanf(job, "%zu %255s", &bytes, name) != 2) dace_ai_driver_fail("container");
        void* memory = nullptr;
        // Exactly `bytes`: the sanitizer's redzone starts right after the last byte. Aligned like the verify
        // child's buffers, so code that passed there is not refused for an alignment it was given.
        if (posix_memalign(&memory, 64, bytes ? bytes : 1) != 0) dace_ai_driver_fail("out of memory");
        buffers[i] = (unsigned char*) memory;
        sizes[i] = bytes;
        FILE* data = fopen(name, "rb");
        if (!data || fread(buffers[i], 1, bytes, data) != bytes) dace_ai_driver_fail("container data");
        fclose(data);
        fprintf(stderr, "dace-ai-buffer %zu %p %zu\n", i, (void*) buffers[i], bytes);
    }
    size_t connectors = dace_ai_driver_count(job, "connectors");
    void** pointers = (void**) calloc(connectors + 1, sizeof(void*));
    size_t* offsets = (size_t*) calloc(connectors + 1, sizeof(size_t));
    size_t* owners = (size_t*) calloc(connectors + 1, sizeof(size_t));
    for (size_t k = 0; k < connectors; ++k) {
        size_t container = 0, offset = 0;
        if (fscanf(job, "%zu %zu", &container, &offset) != 2 || container >= containers)
            dace_ai_driver_fail("connector");
        pointers[k] = buffers[container] + offset;
        offsets[k] = offset;
        owners[k] = container;
    }
    // Calls at once: `at_once threads rounds` (threads 0: none). Thread t > 0 gets a copy of every container, made
    // before any call, as distinct map points get distinct slices; thread 0 calls on the buffers above.
    size_t threads = dace_ai_driver_count(job, "at_once");
    size_t rounds = 0;
    if (fscanf(job, "%zu", &rounds) != 1) dace_ai_driver_fail("at_once");
    fclose(job);
    unsigned char** copies = (unsigned char**) calloc(threads * containers + 1, sizeof(unsigned char*));
    void** own = (void**) calloc(threads * connectors + 1, sizeof(void*));
    for (size_t t = 0; t < threads; ++t) {
        for (size_t i = 0; i < containers; ++i) {
            unsigned char* copy = buffers[i];
            if (t > 0) {
                void* memory = nullptr;
                if (posix_memalign(&memory, 64, sizes[i] ? sizes[i] : 1) != 0) dace_ai_driver_fail("out of memory");
                copy = (unsigned char*) memory;
                memcpy(copy, buffers[i], sizes[i]);
                fprintf(stderr, "dace-ai-buffer %zu %p %zu\n", i, (void*) copy, sizes[i]);
            }
            copies[t * containers + i] = copy;
        }
        for (size_t k = 0; k < connectors; ++k) own[t * connectors + k] = copies[t * containers + owners[k]] + offsets[k];
    }
    fprintf(stderr, "dace-ai-driver: calling the candidate\n");
    void* state = dace_ai_entry_init(symbols);
    dace_ai_entry_run(state, pointers, symbols, params);
    if (threads > 1) {
        fprintf(stderr, "dace-ai-driver: calling the candidate at once\n");
        for (size_t r = 0; r < rounds; ++r) {
#ifdef _OPENMP
#pragma omp parallel num_threads((int) threads)
            dace_ai_entry_run(state, own + (size_t) omp_get_thread_num() * connectors, symbols, params);
#else
            for (size_t t = 0; t < threads; ++t) dace_ai_entry_run(state, own + t * connectors, symbols, params);
#endif
        }
    }
    dace_ai_entry_exit(state, symbols);
    fprintf(stderr, "dace-ai-driver: the candidate returned\n");
    for (size_t t = 1; t < threads; ++t)
        for (size_t i = 0; i < containers; ++i) free(copies[t * containers + i]);
    for (size_t i = 0; i < containers; ++i) free(buffers[i]);
    free(copies);
    free(own);
    free(buffers);
    free(sizes);
    free(offsets);
    free(owners);
    free(pointers);
    free(symbols);
    free(params);
    return 0;
}
