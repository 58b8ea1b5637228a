from trt_lower.cli import main

raise SystemExit(main())
