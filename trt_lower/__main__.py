from trt_lower.cli.commands import main

raise SystemExit(main())
