# Core 1's program of a heterogeneous export (included at the end of the Makefile): the
# same model objects as core 0's, its own main.o and BSP objects (-DAIDGE_CORE=1: UART1),
# linked at its own memory (bsp/memory_core1.ld).
ifneq ($(shell grep -c 'define AIDGE_DUAL_CORE 1' main.cpp 2>/dev/null),0)
CORE1_ELF := bin/$(subst _core0,_core1,$(ELF_NAME))
CORE1_DIR := $(BUILD_DIR)/core1
CORE1_OBJECTS := $(addprefix $(CORE1_DIR)/,$(C_SOURCES:.c=.o) main.o) \
                 $(filter-out $(BUILD_DIR)/main.o $(addprefix $(BUILD_DIR)/,$(C_SOURCES:.c=.o)),$(OBJECTS))
CORE1_LDFLAGS := $(subst bsp/memory.ld,bsp/memory_core1.ld,$(subst $(basename $(ELF_NAME)).map,core1.map,$(LDFLAGS)))

build: $(CORE1_ELF)

$(CORE1_ELF): $(CORE1_OBJECTS) bsp/memory_core1.ld bsp/sections.ld
	@mkdir -p $(dir $@)
	$(CXX) $(CORE1_LDFLAGS) -o $@ $(CORE1_OBJECTS) $(LDLIBS)
	$(SIZE) $@

$(CORE1_DIR)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEFINES) -DAIDGE_CORE=1 $(INCLUDES) -MMD -MP -c $< -o $@

$(CORE1_DIR)/main.o: main.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $(DEFINES) -DAIDGE_CORE=1 $(INCLUDES) -MMD -MP -c $< -o $@
endif
